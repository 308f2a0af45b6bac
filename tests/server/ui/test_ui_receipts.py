"""The inspector's status panel and receipt pages (issue 21) in a real headless Chromium: a
conversation in retrieval mode (with buffering) runs until reflections; an assistant reply's "made
from" link opens its receipt; a group's link lands on exactly the messages ``Memory.receipt_sources``
resolves it to; the panel shows what ``Memory.status`` says; other tenants get 404."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page

from obsmem import Message
from obsmem.om.receipts import RECEIPT_KEY
from tests.integrations.agent_model import small_memory_config
from tests.server.ui.helpers import run
from tests.server.ui_env import DEMO_THREAD, UiEnv, open_ui_env, sign_in

PIN = "Nadia's passport number ends in 4711"


async def _pin_and_talk(env: UiEnv) -> str:
    """A pin, then one more turn: its reply's context shows the pin. Returns the reply's id."""
    await env.memory.pin(DEMO_THREAD, PIN)
    turn = await env.memory.begin_turn(thread_id=DEMO_THREAD, messages=[Message.user("Remind me of my passport?")])
    reply = Message.assistant("It ends in 4711.")
    await turn.end([reply])
    await env.memory.settled()
    return reply.id


async def _until_a_chunk_waits(env: UiEnv) -> None:
    """Talk on (bounded) until a buffered chunk waits for activation: whether the last demo turn
    left one depends on where the window stood when the background buffer ran."""
    for number in range(30):
        if (await env.memory.status(DEMO_THREAD)).buffered:
            return
        turn = await env.memory.begin_turn(thread_id=DEMO_THREAD, messages=[
            Message.user(f"Note {number}: the Berlin flat viewing moved to slot {number}, bring the documents.")])  # fmt: skip
        await turn.end([Message.assistant(f"Noted slot {number}.")])
        await env.memory.settled()


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    config = small_memory_config(retrieval=True, buffered=True)
    with open_ui_env(tmp_path_factory.mktemp("ui-receipts"), turns=60, config=config) as env:
        env.live.call(_until_a_chunk_waits(env))
        yield env


def _reply_after_reflections(ui: UiEnv) -> Message:
    generations = run(ui, ui.memory.list_generations(DEMO_THREAD))
    assert sum(1 for g in generations if g.origin == "reflection") >= 2, "the conversation must reflect"
    replies = [m for m in run(ui, ui.memory.list_messages(DEMO_THREAD))
               if m.role == "assistant" and isinstance(m.metadata.get(RECEIPT_KEY), dict)]  # fmt: skip
    late = [m for m in replies if (m.metadata[RECEIPT_KEY]["generation"] or 0) >= 2
            and any(g[4] == "reflection" for g in m.metadata[RECEIPT_KEY]["groups"])]  # fmt: skip
    assert late, "a reply made from a reflected generation"
    return late[-1]


def _ids(page: Page, selector: str) -> list[str]:
    return page.locator(selector).evaluate_all("els => els.map(e => e.dataset.id)")


def test_a_replys_receipt_leads_to_exactly_the_messages_each_group_covers(alice: Page, ui: UiEnv) -> None:
    reply = _reply_after_reflections(ui)
    receipt = run(ui, ui.memory.receipt(reply.id))
    sources = run(ui, ui.memory.receipt_sources(receipt))
    alice.goto(ui.url + f"/ui/threads/{DEMO_THREAD}?after_seq={reply.seq - 1}")
    alice.locator(f'li.msg[data-id="{reply.id}"] a.receipt-link').click()
    alice.wait_for_url(f"**/ui/messages/{reply.id}/receipt")
    assert alice.locator("#receipt-id").inner_text() == receipt.id
    assert alice.locator("#generation").get_attribute("data-generation") == str(receipt.generation)
    # each group with its span (its messages are on its own page: reflection groups may span the thread)
    shown = alice.locator(".rgroup").evaluate_all("els => els.map(e => e.dataset.group)")
    assert shown == [g.id for g in receipt.groups]
    assert _ids(alice, "ol.raw li.msg") == [m.id for m in sources["raw"]]
    assert alice.locator("input[name=csrf_token]").count() == 1  # the sign-out form, as on every page
    # click a reflection group → exactly the messages it covers (page by page)
    index, group = next((i, g) for i, g in enumerate(receipt.groups) if g.kind == "reflection")
    alice.locator(f'.rgroup[data-group="{group.id}"] a.group-link').click()
    alice.wait_for_url(f"**/ui/messages/{reply.id}/receipt/groups/{index}")
    seen = _ids(alice, "ol.covered li.msg")
    while alice.get_by_role("link", name="Next").count():
        alice.get_by_role("link", name="Next").click()
        seen += _ids(alice, "ol.covered li.msg")
    assert seen == [m.id for m in sources[group.id]] and seen
    # ... and each message links into the timeline, where it is
    first = sources[group.id][0]
    alice.goto(ui.url + f"/ui/messages/{reply.id}/receipt/groups/{index}")
    alice.locator(f'li.msg[data-id="{first.id}"] .meta a').click()
    alice.wait_for_url(f"**/ui/threads/{DEMO_THREAD}?after_seq={first.seq - 1}#seq-{first.seq}")
    assert alice.locator(f"li#seq-{first.seq}").get_attribute("data-id") == first.id


def test_the_status_panel_shows_memory_status(alice: Page, ui: UiEnv) -> None:
    status = run(ui, ui.memory.status(DEMO_THREAD))
    alice.goto(ui.url + f"/ui/threads/{DEMO_THREAD}")
    panel = alice.locator("section.status")
    assert panel.get_attribute("data-phase") == status.phase == alice.locator("#phase").inner_text()
    assert int(panel.get_attribute("data-window") or -1) == status.window_tokens
    assert int(panel.get_attribute("data-threshold") or -1) == status.message_threshold
    assert alice.locator("#window").inner_text() == f"{status.window_tokens} of {status.message_threshold} tokens"
    assert alice.get_by_role("img", name=f"{status.window_tokens} of {status.message_threshold} tokens").count() == 1
    chunks = panel.locator("li[data-chunk]").evaluate_all(
        "els => els.map(e => [e.dataset.chunk, Number(e.dataset.first), Number(e.dataset.last)])")
    assert chunks == [[b.id, b.first_seq, b.last_seq] for b in status.buffered]
    assert status.buffered, "buffering on: a chunk waits for activation"
    # each waiting chunk's span is marked on the timeline (with its chunk), and nothing else is;
    # how many chunks wait depends on where the window stood when the background buffer ran (one
    # or two: a test that assumed one failed once in CI)
    chunk = status.buffered[0]
    spans = {b.id: (b.first_seq, b.last_seq) for b in status.buffered}
    panel.locator(f'li[data-chunk="{chunk.id}"] a').click()
    marked = alice.locator("li.msg.buffered").evaluate_all("els => els.map(e => [Number(e.dataset.seq), e.dataset.chunk])")
    assert any(c == chunk.id for _, c in marked), "the clicked chunk's messages are marked"
    assert all(c in spans and spans[c][0] <= seq <= spans[c][1] for seq, c in marked)
    listed = alice.locator("li.msg").evaluate_all("els => els.map(e => Number(e.dataset.seq))")
    in_spans = [s for s in listed if any(first <= s <= last for first, last in spans.values())]
    assert in_spans == [s for s, _ in marked]


def test_pins_shown_link_to_their_knowledge_page(alice: Page, ui: UiEnv) -> None:
    reply_id = run(ui, _pin_and_talk(ui))
    receipt = run(ui, ui.memory.receipt(reply_id))
    assert receipt is not None and receipt.pin_ids, "the reply's context showed the pin"
    alice.goto(ui.url + f"/ui/messages/{reply_id}/receipt")
    link = alice.locator(f'a[data-record="{receipt.pin_ids[0]}"]')
    assert PIN in link.inner_text()
    link.click()
    alice.wait_for_url("**/ui/knowledge/nodes/**")
    assert PIN in alice.content()


def test_other_tenants_get_404_for_a_receipt(context: BrowserContext, ui: UiEnv) -> None:
    reply = _reply_after_reflections(ui)
    page = context.new_page()
    sign_in(page, ui.url, ui.keys.bob)
    for path in (f"/ui/messages/{reply.id}/receipt", f"/ui/messages/{reply.id}/receipt/groups/0",
                 "/ui/messages/no-such-message/receipt", f"/ui/threads/{DEMO_THREAD}"):
        response = page.goto(ui.url + path)
        assert response is not None and response.status == 404, path
        assert reply.text not in page.content()


async def _talk_with_reply_id(env: UiEnv, reply_id: str) -> None:
    turn = await env.memory.begin_turn(thread_id=DEMO_THREAD, messages=[Message.user("And the flat's address?")])
    await turn.end([Message.assistant("Torstrasse 12.").model_copy(update={"id": reply_id})])
    await env.memory.settled()


def test_a_reply_whose_id_holds_a_slash_opens_its_receipt(alice: Page, ui: UiEnv) -> None:
    """A client's own message ids may hold '/' ('chat/7/reply'): the link quotes it (%2F), which the
    server decodes back to '/' before routing, so the receipt page (and its groups' pages) were a
    404 for such a reply."""
    reply_id = "chat/7/reply"
    run(ui, _talk_with_reply_id(ui, reply_id))
    receipt = run(ui, ui.memory.receipt(reply_id))
    assert receipt is not None
    reply = next(m for m in run(ui, ui.memory.list_messages(DEMO_THREAD)) if m.id == reply_id)
    alice.goto(ui.url + f"/ui/threads/{DEMO_THREAD}?after_seq={(reply.seq or 1) - 1}")
    with alice.expect_navigation():
        alice.locator(f'li.msg[data-id="{reply_id}"] a.receipt-link').click()
    assert alice.locator("#receipt-id").inner_text() == receipt.id
    if receipt.groups:
        with alice.expect_navigation():
            alice.locator(f'.rgroup[data-group="{receipt.groups[0].id}"] a.group-link').click()
        assert alice.locator("ol.covered li.msg").count() > 0
