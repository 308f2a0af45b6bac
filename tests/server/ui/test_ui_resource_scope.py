"""The inspector in resource scope without sharing, in a real headless Chromium: a thread's
pages show what that thread's context shows and nothing of the resource's other threads. Before
the fix the generations page's diff compared the resource's whole records, so another thread's
observations (its "locker code") showed on this thread's page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from obsmem import MemoryConfig, Message
from obsmem.config import ObservationConfig, ReflectionConfig
from tests.server.ui.helpers import run
from tests.server.ui_env import DEMO_THREAD, UiEnv, open_ui_env

SECRET = "locker code"  # what the offline observer keeps of the side thread


async def _side_thread(env: UiEnv) -> None:
    """Another thread of alice's, observed and reflected between the demo's generations."""
    memory = env.memory
    await memory.create_thread("side", "alice", org_id="acme")
    for number in range(16):
        for thread in ("side", DEMO_THREAD):
            text = f"Fact {number}: the locker code is {number}{number}." if thread == "side" else (
                f"Note {number}: the Berlin flat viewing moved to slot {number}.")
            turn = await memory.begin_turn(thread_id=thread, messages=[Message.user(text + " More words here." * 4)])
            await turn.end([Message.assistant(f"Noted {number}. " * 6)])
    await memory.settled()


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    config = MemoryConfig(
        scope="resource", share_threads_in_resource=False,
        observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=300),
    )  # fmt: skip
    with open_ui_env(tmp_path_factory.mktemp("ui-resource"), turns=20, config=config) as env:
        env.live.call(_side_thread(env))
        yield env


def test_a_threads_pages_show_nothing_of_another_thread(alice: Page, ui: UiEnv) -> None:
    generations = run(ui, ui.memory.list_generations(DEMO_THREAD, limit=200))
    assert len(generations) >= 2
    assert any(SECRET in g.active_observations for g in generations)  # the records do hold it
    context = run(ui, ui.memory.get_context(DEMO_THREAD))
    assert all(SECRET not in m.text for m in context.messages)
    for path in ("", "/context", "/generations"):
        alice.goto(f"{ui.url}/ui/threads/{DEMO_THREAD}{path}")
        assert SECRET not in alice.content(), path
    older, newer = generations[-1], generations[0]
    alice.goto(f"{ui.url}/ui/threads/{DEMO_THREAD}/generations?a={older.id}&b={newer.id}")
    assert SECRET not in alice.content()
