"""Hostile review (helper-124): markup, script, SVG, CSS and javascript:-link payloads stored
everywhere a user, a tool or a model can put text (a thread's title and metadata, a user message,
a tool call's name and arguments, a tool result, a pin, the observations made from them, a
knowledge fact, its subject and wikilinks, a review candidate and a rejection's reason), then every
inspector page that shows them opened in a real Chromium: the text shows as text, no element,
attribute, style or link comes from it, and nothing runs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page

from obsmem import Message
from obsmem.om.receipts import RECEIPT_KEY
from obsmem.types import ToolCallPart, ToolResultPart
from tests.server.live import auth
from tests.server.ui.helpers import run
from tests.server.ui_env import UiEnv, open_ui_env

THREAD = "payloads"
PAYLOADS = (
    '<img src=x onerror="window.__pwned=1">',
    '"><svg onload="window.__pwned=2"><circle r=9></svg>',
    "</pre></code></td><script>window.__pwned=3</script>",
    "[claim](javascript:window.__pwned=4) <a href=\"javascript:window.__pwned=5\">link</a>",
    "</style><style>body{display:none}</style><div style=\"background:url(javascript:x)\">",
    "<iframe srcdoc=\"<script>parent.__pwned=6</script>\"></iframe><base href=\"http://evil.example/\">",
    "{{7*7}} ${7*7} <!-- ' \" ` \u202e\u0000 -->",
)
ALL = " ".join(PAYLOADS)

# What no stored text may turn into: any script, frame, image, base or foreign element; any
# inline event handler; any javascript: link; a second stylesheet; a style attribute holding url(
INJECTED = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('script, iframe, img, base, object, embed, circle[r="9"], style ~ style, body style'))
    bad.push(el.outerHTML.slice(0, 120));
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.startsWith('on')) bad.push(el.tagName + ' ' + a.name);
      if (/^\\s*javascript:/i.test(a.value) && (a.name === 'href' || a.name === 'src' || a.name === 'xlink:href'))
        bad.push(el.tagName + ' ' + a.name + '=' + a.value);
      if (a.name === 'style' && /url\\(|expression/i.test(a.value)) bad.push(el.tagName + ' style');
    }
  }
  return bad;
}"""


async def _load(env: UiEnv) -> str:
    """The payloads stored through the library, as a user's agent would; the reply's id."""
    memory = env.memory
    await memory.create_thread(THREAD, "alice", title=PAYLOADS[0], metadata={"note": PAYLOADS[1], PAYLOADS[2]: 1},
                               org_id="acme")  # fmt: skip
    await memory.pin(THREAD, PAYLOADS[3])
    reply = Message.assistant(ALL)
    for number in range(6):
        turn = await memory.begin_turn(thread_id=THREAD, messages=[Message.user(f"Turn {number}: {ALL}")])
        call = Message(role="assistant", parts=[ToolCallPart(tool_call_id=f"c{number}", tool_name=PAYLOADS[0],
                                                             args={"q": ALL, PAYLOADS[4]: [PAYLOADS[5]]})])  # fmt: skip
        result = Message(role="tool", parts=[ToolResultPart(tool_call_id=f"c{number}", tool_name=PAYLOADS[1],
                                                            result={"html": ALL}, is_error=True)])  # fmt: skip
        await turn.step([call, result])
        await turn.end([reply if number == 5 else Message.assistant(f"Noted: {ALL}")])
        await memory.settled()
    await memory.observe(THREAD)
    await memory.settled()
    return reply.id


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-payloads"), turns=1) as env:
        env.live.call(_load(env))
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice)) as client:
            for text in PAYLOADS:
                client.post("/api/knowledge", json={"text": f"{text} knows [[{PAYLOADS[0]}]] and [[{PAYLOADS[3]}]]",
                                                    "subject": PAYLOADS[1]}).raise_for_status()  # fmt: skip
            made = client.post("/api/knowledge", json={"text": ALL, "subject": PAYLOADS[2], "candidate": True})
            made.raise_for_status()
            client.post(f"/api/knowledge/review/{made.json()['id']}/reject", json={"reason": PAYLOADS[0]}).raise_for_status()
            client.post("/api/knowledge", json={"text": ALL, "subject": PAYLOADS[5], "candidate": True}).raise_for_status()
        yield env


def _pages(alice: Page, ui: UiEnv) -> list[str]:
    base = ui.url + "/ui"
    reply = next(m for m in run(ui, ui.memory.list_messages(THREAD))
                 if m.role == "assistant" and isinstance(m.metadata.get(RECEIPT_KEY), dict))  # fmt: skip
    pages = ["/threads?resource_id=alice&q=", f"/threads/{THREAD}", f"/threads/{THREAD}/context",
             f"/threads/{THREAD}/generations", "/knowledge", "/knowledge/audit", "/knowledge/review", "/usage",
             f"/messages/{reply.id}/receipt"]  # fmt: skip
    alice.goto(base + f"/threads/{THREAD}")
    pages += [h.removeprefix("/ui") for h in alice.locator("a.group-link").evaluate_all("a => a.map(e => e.getAttribute('href'))")]
    alice.goto(base + "/knowledge")
    pages += [h.removeprefix("/ui") for h in alice.locator("tbody a").evaluate_all("a => a.map(e => e.getAttribute('href'))")]
    return [base + p for p in pages]


def test_stored_payloads_show_as_text_on_every_page(alice: Page, ui: UiEnv) -> None:
    dialogs: list[str] = []
    alice.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    visited = _pages(alice, ui)
    assert len(visited) > 12, visited
    for address in visited:
        answer = alice.goto(address)
        assert answer is not None and answer.status == 200, address
        assert alice.evaluate("() => window.__pwned") is None, address
        assert alice.evaluate(INJECTED) == [], address
        assert alice.locator("body").is_visible(), address
    assert not dialogs
    alice.goto(ui.url + f"/ui/threads/{THREAD}")
    assert PAYLOADS[0] in alice.locator("li.msg").first.inner_text()
