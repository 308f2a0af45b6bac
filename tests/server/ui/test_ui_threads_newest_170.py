"""The inspector's thread list shows a user's most recently active conversations first (it showed
the oldest first), paged with a link to the next page; only the key's own resource and org; the
oldest-first listing stays one link away."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import httpx
import pytest
from playwright.sync_api import Page, expect

from obsmem import Message
from tests.server.ui_env import DEMO_THREAD, UiEnv, open_ui_env


async def _seed(ui: UiEnv) -> None:
    for n in range(7):
        await ui.memory.create_thread(f"u170-{n}", "alice", title=f"chat {n}", org_id="acme")
    await ui.memory.create_thread("u170-bob", "bob", org_id="acme")
    await ui.memory.create_thread("u170-carol", "carol", org_id="globex")
    await ui.memory.save_messages("u170-1", [Message.user("picking this one up again")])
    await ui.memory.save_messages("u170-carol", [Message.user("newest of all, another org")])
    await ui.memory.save_messages("u170-bob", [Message.user("newer, another resource")])


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-threads-newest-170"), turns=1) as env:
        env.live.call(_seed(env))
        yield env


NEWEST = ["u170-1", "u170-6", "u170-5", "u170-4", "u170-3", "u170-2", "u170-0", DEMO_THREAD]


def _client(ui: UiEnv, key: str) -> httpx.Client:
    return httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": key}, timeout=60)


def _linked_threads(text: str) -> list[str]:
    body = text[text.index("<tbody>") : text.index("</tbody>")]
    return [unescape(m) for m in re.findall(r'<td><a href="/ui/threads/[^"]*">([^<]*)</a>', body)]


def _next(text: str) -> str | None:
    found = re.search(r'<a href="([^"]*)" rel="next">', text)
    return unescape(found.group(1)) if found else None


def test_most_recently_active_first_page_by_page(ui: UiEnv) -> None:
    seen: list[str] = []
    path: str | None = "/ui/threads?limit=3"
    with _client(ui, ui.keys.alice) as client:
        for _ in range(10):
            if path is None:
                break
            shown = client.get(path)
            assert shown.status_code == 200, shown.text
            assert "most recently active first" in shown.text
            seen += _linked_threads(shown.text)
            path = _next(shown.text)
        assert path is None
        assert seen == NEWEST
        oldest = client.get("/ui/threads", params={"order": "oldest"})
    assert _linked_threads(oldest.text) == [DEMO_THREAD] + [f"u170-{n}" for n in range(7)]


def test_only_the_keys_resource_and_org(ui: UiEnv) -> None:
    with _client(ui, ui.keys.bob) as client:
        assert _linked_threads(client.get("/ui/threads").text) == ["u170-bob"]
    with _client(ui, ui.keys.acme_org) as client:
        shown = client.get("/ui/threads", params={"resource_id": "alice"})
        assert _linked_threads(shown.text) == NEWEST
        assert client.get("/ui/threads", params={"resource_id": "carol"}).status_code == 404
    with _client(ui, ui.keys.globex) as client:
        refused = client.get("/ui/threads", params={"resource_id": "alice"})
        assert refused.status_code == 404 and "u170-" not in refused.text


def test_a_user_sees_the_conversation_they_just_had_on_top(alice: Page, ui: UiEnv) -> None:
    ui.live.call(ui.memory.save_messages("u170-4", [Message.user("one more thing")]))
    alice.goto(ui.url + "/ui/threads?limit=3")
    rows = alice.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first.locator("td").first).to_have_text("u170-4")
    alice.get_by_role("link", name="Next 3 threads").click()
    alice.wait_for_url("**before=*")
    expect(rows.first.locator("td").first).to_have_text("u170-5")
