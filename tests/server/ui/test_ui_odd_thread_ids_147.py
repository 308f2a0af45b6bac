"""The inspector opens a thread whatever its id holds, in a real headless Chromium. The gateway
takes any thread id a client names ('user/1/chat'); the threads list linked it as
``/ui/threads/user%2F1%2Fchat``, which the server read as ``/ui/threads/user/1/chat`` and
answered 404 'Not Found' (no route), so such a thread's timeline, context preview and
generations could not be opened. Ids holding '?', '#', '%', spaces, unicode, or 200 characters
are linked and opened the same way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from obsmem import Message
from tests.server.ui.helpers import run
from tests.server.ui_env import UiEnv, open_ui_env

IDS = [
    "user/1/chat",
    "trailing/",
    "what?x=1#frag",
    "100%2F sure %",
    "ünï/チャット 💬",
    "long/" + "é/" * 60 + "x" * 75,
]


async def _threads(env: UiEnv) -> None:
    for number, thread_id in enumerate(IDS):
        await env.memory.create_thread(thread_id, "alice", title=f"odd {number}", org_id="acme")
        turn = await env.memory.begin_turn(thread_id=thread_id, messages=[Message.user(f"odd question {number}")])
        await turn.end([Message.assistant(f"odd answer {number}")])


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-odd-ids"), turns=1) as env:
        env.live.call(_threads(env))
        yield env


@pytest.mark.parametrize("number", range(len(IDS)))
def test_a_thread_with_an_odd_id_opens_from_the_threads_list(alice: Page, ui: UiEnv, number: int) -> None:
    thread_id = IDS[number]
    assert len(thread_id) <= 200
    alice.goto(f"{ui.url}/ui/threads?resource_id=alice")
    alice.get_by_role("link", name=thread_id, exact=True).click()
    # before: 'Not found' (404) for every id holding a '/'
    expect(alice.get_by_role("heading", level=1)).to_have_text(f"Thread {thread_id}")
    expect(alice.locator("li.msg").filter(has_text=f"odd question {number}")).to_have_count(1)
    for link, heading in (("Context preview", f"Context preview · {thread_id}"),
                          ("Generations", f"Generations · {thread_id}"), ("Timeline", f"Thread {thread_id}")):
        alice.get_by_role("navigation", name="Thread").get_by_role("link", name=link).click()
        expect(alice.get_by_role("heading", level=1)).to_have_text(heading)
    assert run(ui, ui.memory.get_thread(thread_id)).id == thread_id


def test_another_resources_key_gets_not_found_for_an_odd_id(context: object, ui: UiEnv) -> None:
    from playwright.sync_api import BrowserContext

    from tests.server.ui_env import sign_in

    assert isinstance(context, BrowserContext)
    bob = context.new_page()
    sign_in(bob, ui.url, ui.keys.bob)
    response = bob.goto(f"{ui.url}/ui/threads/user%2F1%2Fchat")
    assert response is not None and response.status == 404
    expect(bob.get_by_role("heading", level=1)).to_have_text("Not found")
    assert "odd question" not in bob.content()


DOTS = [".", ".."]


async def _dot_threads(env: UiEnv) -> None:
    for thread_id in DOTS:
        if await env.memory.store.get_thread(thread_id) is None:
            await env.memory.create_thread(thread_id, "alice", org_id="acme")
            turn = await env.memory.begin_turn(thread_id=thread_id, messages=[Message.user(f"dots {len(thread_id)}")])
            await turn.end([Message.assistant("noted")])


@pytest.mark.parametrize("thread_id", DOTS)
def test_a_thread_named_by_dots_opens(alice: Page, ui: UiEnv, thread_id: str) -> None:
    """'/ui/threads/..' (or '%2E%2E') is resolved away by the browser before it is sent: the link
    went to /ui/ (the threads list) and the thread could not be opened."""
    run(ui, _dot_threads(ui))
    alice.goto(f"{ui.url}/ui/threads?resource_id=alice")
    alice.get_by_role("link", name=thread_id, exact=True).click()
    expect(alice.get_by_role("heading", level=1)).to_have_text(f"Thread {thread_id}")
    expect(alice.locator("li.msg").filter(has_text=f"dots {len(thread_id)}")).to_have_count(1)
    for link, heading in (("Context preview", f"Context preview · {thread_id}"),
                          ("Generations", f"Generations · {thread_id}"), ("Timeline", f"Thread {thread_id}")):
        alice.get_by_role("navigation", name="Thread").get_by_role("link", name=link).click()
        expect(alice.get_by_role("heading", level=1)).to_have_text(heading)
