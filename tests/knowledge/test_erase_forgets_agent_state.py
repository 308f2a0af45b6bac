"""Delete means gone from this process too, with knowledge on: after ``delete_resource`` the
remind agent still kept the deleted user's recent requests (per thread, up to 1,024 threads) and
the agents' run log their capture results (the records written, up to 200 runs), for the life of
the process (helper-113's finding, left open in its area)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from tests.integrity.test_long_lived_113 import MARK, _holding

pytestmark = pytest.mark.anyio


async def test_an_erase_leaves_no_text_in_the_knowledge_agents(anyio_backend: str) -> None:
    clock = FakeClock(start=datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          knowledge={"curate_max_age_s": None, "trust": "verified"})  # fmt: skip
    async with Knowledge.in_memory(clock=clock) as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge, clock=clock) as memory:
            for i, said in enumerate(["My dog is called Zqxvorbleplum.", "What is my dog called, Zqxvorbleplum?",
                                      "Zqxvorbleplum likes the park."]):
                clock.advance(3600)
                turn = await memory.begin_turn(thread_id="t-alice", resource_id="alice",
                                               messages=[Message.user(said, created_at=clock.now())])
                await turn.end([Message.assistant(f"Noted {i}.", created_at=clock.now())])
                await memory.observe("t-alice")
                await memory.settled()
            assert memory.knowledge_agents is not None
            assert any(run.written for run in memory.knowledge_agents.runs)  # it captured from her
            assert _holding(memory, MARK)  # and keeps her words now

            await memory.delete_resource("alice")

            assert _holding(memory, MARK) == {}
