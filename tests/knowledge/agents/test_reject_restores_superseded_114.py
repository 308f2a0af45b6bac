"""Human review: rejecting a candidate takes back what curate did on its strength.

Default trust (``"candidate"``): the user said "My home city is Berlin" (a candidate), then a
month later "My home city is Paris now" (another); curation removed Berlin as superseded by
Paris. The reviewer rejects Paris ("she was joking"). Before: nothing about her home city was
left anywhere, not even in the review queue, so the reviewer could not approve Berlin. Now Berlin
is restored (audited, with the reviewer as actor) and waits in the queue again.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory, MemoryConfig
from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge

from .alice import said

pytestmark = pytest.mark.anyio


async def say(memory: Memory, clock: FakeClock, text: str) -> None:
    await said(memory, clock, text, after_s=30 * 86400)


async def test_rejecting_the_newer_candidate_brings_the_superseded_one_back(anyio_backend: str) -> None:
    clock = FakeClock(start=datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False})
    async with Knowledge.in_memory(clock=clock, actor="reviewer") as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge, clock=clock) as memory:
            assert memory.knowledge_agents is not None
            scope = memory.knowledge_agents.scope(None, "alice", "t1").key
            await say(memory, clock, "My home city is Berlin.")
            await say(memory, clock, "My home city is Paris now.")
            await memory.curate_knowledge("t1")
            (paris,) = (await knowledge.review.pending(scope)).items
            assert "Paris" in paris.text

            await knowledge.review.reject(paris.id, scope, reason="she was joking")
            pending = [r.text for r in (await knowledge.review.pending(scope)).items]
            assert pending == ["their home city is Berlin"], pending
            events = (await knowledge.store.list_activity(scope, limit=50)).items
            restored = [e for e in events if e.action is ActivityAction.RECORD_RESTORED]
            assert len(restored) == 1 and restored[0].actor == "reviewer"

            (berlin,) = (await knowledge.review.pending(scope)).items
            await knowledge.review.approve(berlin.id, scope, reason="checked with Alice")
            # A later curation does not take it away again for the rejected value.
            await say(memory, clock, "Let's plan a birthday party for Ida.")
            await memory.curate_knowledge("t1")
            user = await knowledge.store.resolve_node("User", scope)
            assert user is not None
            live = [r.text for r in (await knowledge.store.list_about(user.id, scope, limit=50)).items]
            assert "their home city is Berlin" in live, live
