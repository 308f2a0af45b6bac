"""Curation of several threads at once in one process (a server with many users, a worker's
pool) must leave every lane in the lane index, the list ``obsmem worker``'s idle pass walks
(``curate_when_idle``: capture catch-up, then curation when due). The index is updated under a
lease, but every hold of one process used the same lease owner, and a lease taken again by its
owner is renewed: so concurrent updates all "held" it, each read the index before the others
wrote, and the last write won (4 of 6 lanes left here, on SQLite). A lane missing from the index is
never caught up by a worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from tests.knowledge.agents.alice import START

pytestmark = pytest.mark.anyio
THREADS = [f"t{i}" for i in range(6)]


async def test_curating_several_threads_at_once_registers_every_lane(tmp_path: Path) -> None:
    clock = FakeClock(start=START)
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          knowledge={"curate_max_age_s": None})  # fmt: skip
    async with Knowledge.in_memory(clock=clock) as graph, \
            Memory(f"sqlite:///{tmp_path / 'm.db'}", config=config, knowledge=graph, clock=clock) as memory:  # fmt: skip
        assert memory.knowledge_agents is not None
        clock.advance(60)

        async def user(n: int, thread: str) -> None:  # six users, a thread each, at the same time
            message = Message.user(f"My sister number {n} lives in Porto and works as a nurse.", created_at=clock.now())
            async with memory.turn(thread_id=thread, resource_id=f"user-{n}", messages=[message]) as turn:
                await turn.step([Message.assistant("Noted.", created_at=clock.now())])
            await memory.observe(thread)

        await asyncio.gather(*(user(n, thread) for n, thread in enumerate(THREADS)))
        await memory.settled()  # the knowledge agents ran on each thread, in the background
        lanes = await memory.knowledge_agents.lanes.all_lanes()
        assert sorted(lane for lane in lanes if lane.startswith("curate:")) == [f"curate:{t}" for t in THREADS]
