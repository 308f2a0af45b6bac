"""The smallest reproductions of invariant violations the lifecycle fuzzer found.

Each test builds the failing interleaving by hand, deterministically, and asserts the invariant
the fuzzer saw broken. None is skipped or xfailed: a test here fails until the engine is fixed,
and then guards the fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Literal

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage.contract import ObservationRecord, WriteResult
from obsmem.storage.memory import MemoryStore
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio

START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


class AfterActivation(MemoryStore):
    """Runs ``between`` once, right after the first applied write that activates chunks (cursor
    forward, fewer chunks): the moment another process may commit before the writer's next read."""

    def __init__(self) -> None:
        super().__init__()
        self.between: Callable[[], Awaitable[None]] | None = None

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        before = await self.get_record(record.id)
        result = await super().update_record(record, expected_version=expected_version)
        activated = (
            result.applied and before is not None
            and record.cursor("t1") > before.cursor("t1")
            and len(record.buffered_chunks) < len(before.buffered_chunks)
        )
        if activated and self.between is not None:
            between, self.between = self.between, None
            await between()
        return result


class HeldBuffers(OfflineObserver):
    """Buffered (background) calls wait for ``release``; synchronous ones run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.buffered = 0

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        if request.buffered:
            self.buffered += 1
            await self.release.wait()
        return await super().observe(request)


def message(mid: str, role: Literal["user", "assistant"], text: str, minute: int) -> Message:
    return Message(id=mid, role=role, parts=(TextPart(text=text),), created_at=START.replace(minute=minute))


async def test_a_chunk_appended_between_activation_and_the_reread_is_not_observed_again() -> None:
    """Fuzz seed 144 (MemoryStore, 40 ops) shrunk to its interleaving; fixed in 2f008f2.

    Engine A's ``observe(force=True)`` activates the stored chunks, then re-reads the head. If
    engine B appends a chunk in between (its buffer started after A's chunks, so it continues
    the new cursor exactly), A's re-read record carries B's chunk, A observes every unobserved
    message *including B's chunk's* and commits with B's chunk still stored: the cursor passes
    the chunk (``chunk.first_seq <= cursor``), and activating that chunk later would add the
    same messages to the observations a second time.
    """
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=1000),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    clock = FakeClock(START)
    store = AfterActivation()
    held = HeldBuffers()
    a = Memory(store, config=config, clock=clock)
    b = Memory(store, config=config, clock=clock, observer=held)
    try:
        # A buffers the first messages into a chunk (below the threshold: nothing active yet).
        facts = ["I live in Munich with my partner Alex.", "My daughter Mia is seven years old.",
                 "I'm allergic to peanuts."]
        texts = [
            (f"{fact} Also, question {i}: can you explain how step {i} of the migration plan works?",
             (f"Sure. Step {i} moves table t{i} to the new cluster, verifies row counts, and switches reads. "
             f"It usually takes about {10 + i} minutes and can be rolled back by pointing reads back."))
            for i, fact in enumerate(facts)
        ]
        for i, (user, reply) in enumerate(texts):
            first = message(f"u{i}", "user", user, 2 * i)
            turn = await a.begin_turn(thread_id="t1", resource_id="u1", messages=[first])
            await turn.step([message(f"a{i}", "assistant", reply, 2 * i + 1)])
            await turn.end()
            await a.settled()
        # Two more messages arrive (saved by another process, no step ran on them yet).
        await store.save_messages("t1", [
            message("u9", "user", "One more thing: my partner Alex is vegetarian.", 20),
            message("a9", "assistant", "Noted, I will keep that in mind for restaurant picks.", 21),
        ])
        thread = await a.get_thread("t1")
        head = await store.get_head("thread:t1")
        assert head is not None and head.buffered_chunks and head.cursor("t1") == 0
        a_chunks_end = head.buffered_chunks[-1].last_seq

        # B starts a buffer over the messages after A's chunks; its model call is held.
        assert b.engine.buffered is not None
        assert await b.engine.buffered.maybe_start_buffer(thread, idle=True)
        for _ in range(20):
            await asyncio.sleep(0)
        assert held.buffered == 1

        async def b_finishes() -> None:
            held.release.set()
            await b.settled()

        store.between = b_finishes
        await a.engine.observe(thread, force=True)

        head = await store.get_head("thread:t1")
        assert head is not None
        cursor = head.cursor("t1")
        stale = [(c.first_seq, c.last_seq) for c in head.buffered_chunks if c.first_seq <= cursor]
        assert cursor > a_chunks_end, "A's observation committed"
        assert not stale, (
            f"chunks {stale} cover messages already observed (cursor {cursor}): activating them "
            "would observe those messages a second time"
        )
    finally:
        held.release.set()
        await a.aclose()
        await b.aclose()
