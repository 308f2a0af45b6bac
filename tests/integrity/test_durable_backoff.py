"""A model that keeps failing is not called on every turn (issue 12, item 4, the durable half).

Seen from the user's side: a ``Memory`` whose observer (or reflector) model fails, or answers
degenerately, every time. Before the fix every turn past the threshold called it again (a turn
a second for twenty seconds: twenty calls, each one billed, each one slow). Now a failure backs
off: the record says, for its role, how many failures in a row, until when, what kind and what
error (``record.metadata["obsmem_backoff"]``), written with the record's compare-and-set, so a
second process on the same store sees it too. One failure costs no wait (the next due step tries
again); from the second in a row the threshold paths (turns, buffers, workers) skip the model
until then, with ``*-backoff-skipped`` events, for ``failure_backoff`` (30 s), doubling with each
further failure up to 15 minutes; the first success clears it. A manual ``memory.observe()`` /
``memory.reflect()`` always calls the model.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.engine.helpers import Conversation, chat_turns, fake_clock

from obsmem import Memory, MemoryConfig, ObservationConfig
from obsmem.clock import FakeClock
from obsmem.models.base import ModelRequest
from obsmem.models.testing import FunctionModel
from obsmem.om.engine import EngineEvent
from obsmem.types import Message

pytestmark = pytest.mark.anyio


class Flaky:
    """A model function that fails (or loops) until ``healthy`` is set; counts its calls."""

    def __init__(self, failure: str = "error") -> None:
        self.failure = failure
        self.healthy = False
        self.calls = 0

    def __call__(self, messages: list[Message], settings: ModelRequest | None) -> str:
        self.calls += 1
        if self.healthy:
            return (
                "<observations>\nDate: Jun 15, 2025\n"
                f"* 🔴 (09:{self.calls % 60:02d}) User shared fact number {self.calls} about the trip.\n"
                "</observations>"
            )
        if self.failure == "degenerate":
            loop = "* 🔴 (09:01) User lives in Munich.\n" * 300
            return f"<observations>\nDate: Jun 15, 2025\n{loop}</observations>"
        raise RuntimeError(f"model exploded (call {self.calls})")


def sync_config(**observation: Any) -> MemoryConfig:
    return MemoryConfig(observation=ObservationConfig(message_tokens=300, buffer_tokens=False, **observation))


async def run_turns(memory: Memory, conv: Conversation, clock: FakeClock, turns: int, *, start: int = 0) -> None:
    """``turns`` turns of a user message and a reply, the clock moving 1 s per turn."""
    for user_text, reply in list(chat_turns(start + turns))[start:]:
        async with memory.turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)]) as turn:
            await turn.step([conv.assistant(reply)])
        clock.advance(1)


def backoff_of(metadata: dict[str, Any], role: str) -> dict[str, Any] | None:
    entry = metadata.get("obsmem_backoff", {}).get(role)
    return entry if isinstance(entry, dict) else None


@pytest.mark.parametrize("failure", ["error", "degenerate"])
async def test_a_failing_observer_backs_off_durably_and_recovers(tmp_path: Path, failure: str) -> None:
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    clock, conv, flaky = fake_clock(), Conversation(), Flaky(failure)
    events: list[EngineEvent] = []
    memory = Memory(
        db, config=sync_config(), observer=FunctionModel(flaky), reflector="offline", clock=clock,
        failure_policy="warn", on_event=events.append,
    )
    async with memory:
        await run_turns(memory, conv, clock, 20)
        # Every one of these turns is past the threshold; before, each called the model again.
        # Now: one failure is retried at the next turn, the second backs off 30 s.
        limit = 4 if failure == "degenerate" else 2  # (a degenerate answer is asked again once)
        assert 1 <= flaky.calls <= limit, f"{flaky.calls} model calls in 20 turns, 1 s apart"
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0, "the messages stay pending"
        entry = backoff_of(record.metadata, "observation")
        assert entry is not None, record.metadata
        backoffs = [e for e in events if e.kind == "observation-backoff"]
        assert entry["failures"] == len(backoffs) == 2
        assert entry["kind"] == ("degenerate" if failure == "degenerate" else "error")
        assert entry["error"]
        until = datetime.fromisoformat(entry["until"])
        assert until > clock.now()
        assert [e.data["failures"] for e in backoffs] == [1, 2]
        assert [e.data["wait_s"] for e in backoffs] == [0.0, 30.0]
        assert datetime.fromisoformat(backoffs[1].data["until"]) - timedelta(seconds=30) <= clock.now()
        assert all(e.data["error"] and e.data["until"] for e in backoffs)
        skipped = [e for e in events if e.kind == "observation-backoff-skipped"]
        assert len(skipped) >= 15 and all("until" in e.data for e in skipped)

    # Another process on the same file sees the backoff: it does not call its model either.
    other = Flaky()
    async with Memory(
        db, config=sync_config(), observer=FunctionModel(other), reflector="offline", clock=clock,
        failure_policy="warn",
    ) as second:
        await run_turns(second, conv, clock, 2, start=20)
        assert other.calls == 0

        # Once the backoff has passed and the model works again, the messages are observed and
        # the backoff is gone.
        clock.advance((until - clock.now()).total_seconds() + 1)
        other.healthy = True
        await run_turns(second, conv, clock, 1, start=22)
        assert other.calls >= 1
        record = await second.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        assert "fact number" in record.active_observations
        assert backoff_of(record.metadata, "observation") is None


async def test_the_wait_doubles_per_failure_and_is_capped(tmp_path: Path) -> None:
    clock, conv, flaky = fake_clock(), Conversation(), Flaky()
    events: list[EngineEvent] = []
    async with Memory(
        "memory://", config=sync_config(), observer=FunctionModel(flaky), reflector="offline", clock=clock,
        failure_policy="warn", on_event=events.append,
    ) as memory:
        waits: list[float] = []
        await run_turns(memory, conv, clock, 8)
        for _ in range(8):  # wait each backoff out, then the next turn fails again
            record = await memory.get_record("t1")
            entry = backoff_of(record.metadata, "observation") if record is not None else None
            assert entry is not None
            clock.advance((datetime.fromisoformat(entry["until"]) - clock.now()).total_seconds() + 1)
            await run_turns(memory, conv, clock, 1, start=8)
        for event in [e for e in events if e.kind == "observation-backoff"]:
            waits.append(event.data["wait_s"])
        assert waits[:7] == [0.0, 30.0, 60.0, 120.0, 240.0, 480.0, 900.0]
        assert set(waits[7:]) == {900.0}


async def test_a_manual_observe_ignores_the_backoff_and_a_success_clears_it() -> None:
    clock, conv, flaky = fake_clock(), Conversation(), Flaky()
    async with Memory(
        "memory://", config=sync_config(), observer=FunctionModel(flaky), reflector="offline", clock=clock,
        failure_policy="warn",
    ) as memory:
        await run_turns(memory, conv, clock, 6)
        calls = flaky.calls
        assert calls >= 1
        flaky.healthy = True
        outcome = await memory.observe("t1")
        assert flaky.calls == calls + 1 and outcome.applied
        record = await memory.get_record("t1")
        assert record is not None and backoff_of(record.metadata, "observation") is None


async def test_failing_buffers_back_off_too() -> None:
    clock, conv, flaky = fake_clock(), Conversation(), Flaky()
    events: list[EngineEvent] = []
    config = MemoryConfig(observation={"message_tokens": 600, "buffer_tokens": 0.2, "block_after": 5.0})
    async with Memory(
        "memory://", config=config, observer=FunctionModel(flaky), reflector="offline", clock=clock,
        failure_policy="warn", on_event=events.append,
    ) as memory:
        for user_text, reply in chat_turns(20):
            async with memory.turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)]) as turn:
                await turn.step([conv.assistant(reply)])
            await memory.settled()
            clock.advance(1)
        assert 1 <= flaky.calls <= 3, f"{flaky.calls} observer calls in 20 turns, 1 s apart"
        assert any(e.kind == "observation-backoff" for e in events)
        assert any(e.kind == "observation-backoff-skipped" for e in events)


async def test_a_failing_reflector_backs_off() -> None:
    clock, conv = fake_clock(), Conversation()
    flaky = Flaky()
    events: list[EngineEvent] = []
    config = MemoryConfig(
        observation={"message_tokens": 200, "buffer_tokens": False},
        reflection={"observation_tokens": 150},
    )
    async with Memory(
        "memory://", config=config, observer="offline", reflector=FunctionModel(flaky), clock=clock,
        failure_policy="warn", on_event=events.append,
    ) as memory:
        await run_turns(memory, conv, clock, 20)
        observed = [e for e in events if e.kind == "observation-end"]
        assert len(observed) >= 5, "observations keep growing, so every one is a new reflection input"
        assert 1 <= flaky.calls <= 2, f"{flaky.calls} reflector calls for {len(observed)} observations"
        backoff = [e for e in events if e.kind == "reflection-backoff"]
        assert [e.data["failures"] for e in backoff] == list(range(1, flaky.calls + 1))
        assert backoff[-1].data["until"] and backoff[-1].data["wait_s"] == 30.0
        assert any(e.kind == "reflection-backoff-skipped" for e in events)
        record = await memory.get_record("t1")
        assert record is not None and backoff_of(record.metadata, "reflection") is not None
        # a manual reflect calls the model whatever the backoff
        calls = flaky.calls
        await memory.reflect("t1")
        assert flaky.calls > calls
