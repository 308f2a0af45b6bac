"""Alice talking to an agent with knowledge on, over simulated days (helper-114's reviews): one
user message at a time, stamped by the test's clock, observed and settled, so the knowledge
agents have run on it before the test looks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from obsmem import Memory, MemoryConfig, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge


async def said(memory: Memory, clock: FakeClock, text: str, *, after_s: float, thread: str = "t1") -> None:
    """Alice says ``text`` in ``thread``, ``after_s`` seconds after the clock's time; the agent
    answers "Noted."; the thread is observed and every piece of memory work settled."""
    clock.advance(after_s)
    message = Message.user(text, created_at=clock.now())
    async with memory.turn(thread_id=thread, resource_id="alice", messages=[message]) as turn:
        await turn.step([Message.assistant("Noted.", created_at=clock.now())])
    await memory.observe(thread)
    await memory.settled()


START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@asynccontextmanager
async def alice_memory(actor: str | None = None, **knowledge: Any) -> AsyncIterator[tuple[Memory, Knowledge, FakeClock]]:
    """A memory with knowledge on (in memory, ``knowledge`` the options beyond the default's, the
    curate agent due at every run), thresholds small enough that each message is observed, and
    the clock they share, from :data:`START`."""
    clock = FakeClock(start=START)
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          knowledge={"curate_max_age_s": None, **knowledge})  # fmt: skip
    async with Knowledge.in_memory(clock=clock, **({"actor": actor} if actor else {})) as graph:
        async with Memory("memory://", config=config, knowledge=graph, clock=clock) as memory:
            assert memory.knowledge_agents is not None
            yield memory, graph, clock


# Tombstone tests: alice says something in t1, a reviewer rejects what was captured for good.
async def say(memory: Memory, clock: FakeClock, text: str) -> None:
    await said(memory, clock, text, after_s=3600, thread="t1")


async def pending(memory: Memory, knowledge: Knowledge) -> list[str]:
    scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
    return [r.text for r in (await knowledge.review.pending(scope)).items]


async def tombstone_what_is_pending(memory: Memory, knowledge: Knowledge) -> None:
    scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
    items = (await knowledge.review.pending(scope)).items
    assert items, "nothing was captured to reject"
    for record in items:
        await knowledge.review.reject(record.id, scope, reason="deleted by the user", tombstone=True)
