"""The generations page's diff is bounded work, done off the event loop.

The diff (``difflib.SequenceMatcher`` with ``autojunk=False`` over the two generations'
observation lines) is quadratic in the lines a record repeats: 4,000 repeated lines took 4.8 s,
20,000 about two minutes, all on the server's event loop, where every request of every tenant
waits. A record holds whatever a reflection wrote or an import brought (an export's records are
restored as they are). The page now compares at most ``DIFF_LINES`` lines of each generation (and
says so), in a thread. The test counts work, never time: ``difflib.SequenceMatcher`` notes the
thread it ran on and how many lines it compared."""

from __future__ import annotations

import difflib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.server.ui.helpers import run
from tests.server.ui_env import DEMO_THREAD, UiEnv, open_ui_env

REPEATED = 6000
#: The most lines of each generation the page compares (obsmem.server.ui.pages.DIFF_LINES).
DIFF_LINES = 2000


async def _ident() -> int:
    return threading.get_ident()


async def _two_large_generations(env: UiEnv) -> None:
    store = env.memory.store
    for first in ("", "* the one line that differs\n"):
        head = await env.memory.get_record(DEMO_THREAD)
        assert head is not None
        text = first + "* the same observation, repeated\n" * REPEATED
        successor = head.model_copy(update={"id": uuid.uuid4().hex, "active_observations": text, "version": 1,
                                            "origin": "reflection", "superseded_by": None})  # fmt: skip
        result = await store.create_generation(head, successor, expected_version=head.version)
        assert getattr(result, "ok", True), result


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-diff-147"), turns=4) as env:
        env.live.call(_two_large_generations(env))
        yield env


def test_the_diff_of_large_generations_is_bounded_and_off_the_loop(
    alice: Page, ui: UiEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = run(ui, _ident())
    compared: list[tuple[int, int, int]] = []
    original = difflib.SequenceMatcher

    class Watched(original):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            compared.append((threading.get_ident(), len(self.a), len(self.b)))

    monkeypatch.setattr(difflib, "SequenceMatcher", Watched)
    alice.goto(f"{ui.url}/ui/threads/{DEMO_THREAD}/generations")
    expect(alice.get_by_role("heading", level=1)).to_have_text(f"Generations · {DEMO_THREAD}")
    expect(alice.locator(".diff-summary")).to_contain_text("generation")
    monkeypatch.undo()
    big = [entry for entry in compared if max(entry[1], entry[2]) > 100]
    assert big, compared
    assert all(ident != loop_thread for ident, _, _ in big), "the diff ran on the event loop"
    assert all(a <= DIFF_LINES and b <= DIFF_LINES for _, a, b in big), big  # was 6,001 lines each
    expect(alice.locator(".diff-summary")).to_contain_text(f"first {DIFF_LINES:,} lines")
