"""Capture reads a long observation delta for stated secrets off the event loop (found by
helper-142: since 39ff337 the secret rules take about a second per 100 KB of Markdown tables,
measured 0.97 s for 134 KB, and capture ran them on the loop's thread, holding every turn of the
process meanwhile). A short delta is still read where it is (no thread hand-off)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import obsmem.knowledge.agents.capture as capture_module
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.storage import Store
from tests.knowledge.agents.conftest import agents_for, observation


def _watch(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    seen: list[tuple[int, bool]] = []
    loop_thread = threading.get_ident()
    original = capture_module.secret_values

    def watched(text: str) -> Any:
        seen.append((len(text), threading.get_ident() == loop_thread))
        return original(text)

    monkeypatch.setattr(capture_module, "secret_values", watched)
    return seen


async def test_a_long_delta_is_read_for_secrets_off_the_loop(
    knowledge: Knowledge, store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _watch(monkeypatch)
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    table = "\n".join(f"| service{i} | user{i} | note {i} about the thing |" for i in range(800))
    delta = observation(
        "* 🔴 (07:48) User stated their dog is called Kiwi.",
        "* 🟡 (07:49) User shared their services table:\n| Service | User | Notes |\n|---|---|---|\n" + table,
    )
    run = await agents.capture(delta, scope, source_thread_id="t1")
    assert run.written, run
    assert seen and all(not on_loop for size, on_loop in seen if size >= 16_384), seen


async def test_a_short_delta_is_read_where_it_is(
    knowledge: Knowledge, store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _watch(monkeypatch)
    agents = agents_for(knowledge, store, clock)
    run = await agents.capture(observation("* 🔴 (07:48) User stated their dog is called Kiwi."),
                               agents.scope("acme", "alice", "t1"), source_thread_id="t1")
    assert run.written and seen and all(on_loop for _, on_loop in seen)
