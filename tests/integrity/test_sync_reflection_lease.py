"""Synchronous reflection and observation under several processes (issue 13, item 5).

Seen from the user's side: two ``Memory`` objects (two processes) on one SQLite file, buffering
off, reach the reflection threshold of the same thread at the same moment. Before the fix both
called their reflector (two paid calls for one generation) and the loser's start marker was
never closed. Now a synchronous reflection (and observation) takes a lease first, as buffered
work does: the process that does not get it makes no model call and goes on with the current
record at once (it never waits, so the turn bound holds trivially); the next boundary sees the
new generation. Every start marker a synchronous cycle writes gets its end or failed marker:
when it commits, when the model fails, when its compare-and-set loses, when it is cancelled.

The test doubles are gated with :class:`asyncio.Event`, never with sleeps: a gated model holds
its call until the test releases it, so "at the same moment" is exact.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.engine.helpers import Conversation, fake_clock

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.models.base import ModelRequest
from obsmem.models.testing import FunctionModel
from obsmem.types import DataPart, Message

pytestmark = pytest.mark.anyio

LINES = [f"* 🔴 (09:{i:02d}) User stated fact number {i} about the trip to Oslo in June." for i in range(24)]
THRESHOLD = 300
CONDENSED = "<observations>\nDate: Jun 15, 2025\n* 🔴 (09:00) User stated facts 0 to 23 about the Oslo trip.\n</observations>"
OBSERVED = "<observations>\nDate: Jun 15, 2025\n* 🔴 (09:00) User talked about the migration plan.\n</observations>"

STARTS = {"om-observation-start", "om-buffering-start"}
CLOSES = {"om-observation-end", "om-observation-failed", "om-buffering-end", "om-buffering-failed"}


class Gated:
    """A model function that counts its calls, says when one began (``entered``) and holds it
    until ``release`` is set; then answers ``answer`` or raises when ``fail`` is set."""

    def __init__(self, answer: str, *, held: bool = True, fail: bool = False) -> None:
        self.answer = answer
        self.fail = fail
        self.calls = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        if not held:
            self.release.set()

    async def __call__(self, messages: list[Message], settings: ModelRequest | None) -> str:
        self.calls += 1
        self.entered.set()
        await self.release.wait()
        if self.fail:
            raise RuntimeError(f"model exploded (call {self.calls})")
        return self.answer


def config(message_tokens: int = 1000) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=THRESHOLD),
    )


def memory(db: str, clock: FakeClock, *, observer: Any = "offline", reflector: Any = "offline", **kw: Any) -> Memory:
    return Memory(db, config=kw.pop("config", config()), observer=observer, reflector=reflector, clock=clock,
                  failure_policy="warn", **kw)


async def seed_observed(mem: Memory, conv: Conversation) -> None:
    """Thread t1 with two observed messages and observations above the reflection threshold."""
    thread = await mem.create_thread("t1", "u1")
    saved = await mem.save_messages("t1", [conv.user("Let's plan the Oslo trip."), conv.assistant("Sure, tell me.")])
    head = await mem.engine.head(thread)
    active = "\n".join(LINES)
    seeded = head.model_copy(update={
        "active_observations": active,
        "observation_tokens": mem.counter.count_text(active),
        "threads": {"t1": head.threads["t1"].model_copy(update={"cursor": saved[-1].seq})},
    })
    assert (await mem.store.update_record(seeded, expected_version=head.version)).applied
    assert seeded.observation_tokens >= THRESHOLD


async def unclosed(mem: Memory) -> tuple[list[str], list[str]]:
    """Cycle ids of the thread's start markers with no closing marker, and with more than one."""
    messages = await mem.list_messages("t1")
    parts = [p for m in messages for p in m.parts if isinstance(p, DataPart)]
    started = [p.data["cycle_id"] for p in parts if p.name in STARTS]
    closed = [p.data["cycle_id"] for p in parts if p.name in CLOSES]
    assert started, "the scan found no start marker: it would prove nothing"
    return [c for c in started if c not in closed], [c for c in started if closed.count(c) > 1]


async def test_two_processes_at_the_reflection_threshold_make_one_reflector_call(tmp_path: Path) -> None:
    db, clock, conv = f"sqlite:///{tmp_path / 'memory.db'}", fake_clock(), Conversation()
    first, second = Gated(CONDENSED), Gated(CONDENSED, held=False)
    a = memory(db, clock, reflector=FunctionModel(first))
    b = memory(db, clock, reflector=FunctionModel(second))
    async with a, b:
        try:
            await seed_observed(a, conv)
            turn_a = asyncio.create_task(a.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Hi.")]))
            await first.entered.wait()  # a holds its reflector call: both processes are past the threshold now
            turn_b = await b.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Hello?")])
            assert second.calls == 0, "the second process called its reflector while the first was reflecting"
            assert not any(o.operation == "reflection" and o.applied for o in turn_b.outcomes)
            assert turn_b.waited_out == 0 and not turn_b.waited, "the loser goes on at once"
            record = await b.get_record("t1")
            assert record is not None and record.generation == 0, "b went on with the current record"
            first.release.set()
            turn = await turn_a
            await turn.end()
            await turn_b.end()
            assert any(o.operation == "reflection" and o.applied for o in turn.outcomes)
            assert first.calls + second.calls == 1
            generations = await a.list_generations("t1")
            assert [g.generation for g in generations] == [1, 0], "exactly one new generation"
            assert "facts 0 to 23" in generations[0].active_observations
            # The next boundary of the second process sees the new generation: nothing more to do.
            again = await b.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Still there?")])
            await again.end()
            assert first.calls + second.calls == 1
            assert len(await b.list_generations("t1")) == 2
            assert await a.store.list_leases() == [], "every lease was released"
            assert await unclosed(a) == ([], [])
        finally:  # a failed assertion must not leave a call held (closing would wait for it)
            first.release.set()
            second.release.set()


async def test_two_processes_at_the_observation_threshold_make_one_observer_call(tmp_path: Path) -> None:
    db, clock, conv = f"sqlite:///{tmp_path / 'memory.db'}", fake_clock(), Conversation()
    first, second = Gated(OBSERVED), Gated(OBSERVED, held=False)
    cfg = config(message_tokens=200)
    a = memory(db, clock, config=cfg, observer=FunctionModel(first))
    b = memory(db, clock, config=cfg, observer=FunctionModel(second))
    async with a, b:
        try:
            await a.create_thread("t1", "u1")
            talk = [conv.user("Let's go through the migration plan step by step, table by table, in detail.")]
            for i in range(6):
                talk.append(conv.assistant(f"Step {i} moves table t{i} to the new cluster, checks row counts and "
                                           f"switches reads over; it takes about {10 + i} minutes and can be undone."))
                talk.append(conv.user(f"Good. What about step {i + 1}, and how long would that one take?"))
            talk.append(conv.assistant("Step 6 is the last one: it retires the old cluster."))
            await a.save_messages("t1", talk)
            turn_a = asyncio.create_task(a.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Next?")]))
            await first.entered.wait()
            turn_b = await b.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("And then?")])
            assert second.calls == 0, "the second process called its observer while the first was observing"
            assert turn_b.waited_out == 0 and not turn_b.waited
            first.release.set()
            turn = await turn_a
            await turn.end()
            await turn_b.end()
            assert first.calls + second.calls == 1
            assert any(o.operation == "observation" and o.applied for o in turn.outcomes)
            record = await a.get_record("t1")
            assert record is not None and record.cursor("t1") > 0
            assert record.active_observations.count("migration plan") == 1, "observed once"
            assert await a.store.list_leases() == []
            assert await unclosed(a) == ([], [])
        finally:  # a failed assertion must not leave a call held (closing would wait for it)
            first.release.set()
            second.release.set()


@pytest.mark.parametrize("scenario", ["committed", "model-fails", "cas-lost", "cancelled"])
async def test_every_start_marker_of_a_sync_reflection_is_closed(tmp_path: Path, scenario: str) -> None:
    db, clock, conv = f"sqlite:///{tmp_path / 'memory.db'}", fake_clock(), Conversation()
    gated = Gated(CONDENSED, fail=scenario == "model-fails")
    a = memory(db, clock, reflector=FunctionModel(gated))
    await seed_observed(a, conv)
    turn_a = asyncio.create_task(a.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Hi.")]))
    await gated.entered.wait()
    if scenario == "cas-lost":
        # Another writer (one that takes no lease: a buffered reflection activating, an older
        # version) makes the next generation while the reflector runs: the result no longer applies.
        head = await a.get_record("t1")
        assert head is not None
        successor = head.model_copy(update={
            "id": f"omr_{uuid.uuid4().hex}", "generation": head.generation + 1, "version": 1,
            "active_observations": "* 🔴 (09:00) Condensed elsewhere.", "observation_tokens": 10,
        })
        assert (await a.store.create_generation(head, successor, expected_version=head.version)).applied
    if scenario == "cancelled":
        await a.aclose(cancel=True)  # the turn's work is an owned task: closing cancels it mid-call
        await asyncio.gather(turn_a, return_exceptions=True)
    else:
        gated.release.set()
        turn = await turn_a
        await turn.end()
        await a.aclose()
    assert gated.calls >= 1
    async with memory(db, clock) as reader:
        assert await reader.store.list_leases() == [], "the lease was released"
        assert await unclosed(reader) == ([], [])
        if scenario == "cas-lost":
            messages = await reader.list_messages("t1")
            failed = [p for m in messages for p in m.parts if isinstance(p, DataPart)
                      and p.name == "om-observation-failed" and p.data.get("operation_type") == "reflection"]
            assert failed and "superseded" in failed[-1].data["error"]


async def test_a_cancelled_sync_observation_closes_its_marker_and_lease(tmp_path: Path) -> None:
    db, clock, conv = f"sqlite:///{tmp_path / 'memory.db'}", fake_clock(), Conversation()
    gated = Gated(OBSERVED)
    a = memory(db, clock, config=config(message_tokens=200), observer=FunctionModel(gated))
    await a.create_thread("t1", "u1")
    talk: list[Message] = []
    for i in range(6):
        talk += [conv.user(f"Tell me about step {i} of the migration plan, in as much detail as you can."),
                 conv.assistant(f"Step {i} moves table t{i} to the new cluster and switches reads over.")]
    await a.save_messages("t1", talk)
    turn_a = asyncio.create_task(a.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Next?")]))
    await gated.entered.wait()
    await a.aclose(cancel=True)
    await asyncio.gather(turn_a, return_exceptions=True)
    async with memory(db, clock) as reader:
        assert await reader.store.list_leases() == []
        assert await unclosed(reader) == ([], [])


async def test_a_cancelled_buffer_closes_its_start_marker(tmp_path: Path) -> None:
    """Buffered observation too: a buffer cancelled by aclose leaves no open start marker (before,
    only synchronous cycles were closed; a cancelled buffer's start stayed open forever)."""
    db, clock, conv = f"sqlite:///{tmp_path / 'memory.db'}", fake_clock(), Conversation()
    gated = Gated(OBSERVED)
    buffered = MemoryConfig(
        observation=ObservationConfig(message_tokens=2000, buffer_tokens=0.1),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    a = memory(db, clock, config=buffered, observer=FunctionModel(gated))
    for i in range(8):
        async with a.turn(thread_id="t1", resource_id="u1", messages=[
            conv.user(f"Tell me about step {i} of the migration plan, in as much detail as you can.")
        ]) as turn:
            await turn.step([conv.assistant(f"Step {i} moves table t{i} to the new cluster and switches reads.")])
        if gated.entered.is_set():
            break
    assert gated.entered.is_set(), "no buffer started: the test would prove nothing"
    await a.aclose(cancel=True)
    async with memory(db, clock) as reader:
        assert await unclosed(reader) == ([], [])
