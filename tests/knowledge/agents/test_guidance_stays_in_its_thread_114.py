"""Scope ceilings, from the user's side: what one thread said never surfaces in a sibling thread,
not even as the attribute names the curate agent lists in its ``capture-guidance`` node.

Before: Alice told thread t1 "My divorce lawyer is called Dr. Weiss" (a thread-scoped record);
after curation, a search from her other thread t2 for "divorce lawyer" returned the resource's
capture-guidance node, "Attributes in use for User: divorce lawyer name. …", and so did t2's
node listing and the LLM capture prompt there.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents.curate import CAPTURE_GUIDANCE

pytestmark = pytest.mark.anyio


async def say(memory: Memory, clock: FakeClock, thread: str, text: str) -> None:
    clock.advance(3600)
    message = Message.user(text, created_at=clock.now())
    async with memory.turn(thread_id=thread, resource_id="alice", messages=[message]) as turn:
        await turn.step([Message.assistant("Noted.", created_at=clock.now())])
    await memory.observe(thread)
    await memory.settled()


@pytest.mark.parametrize("record_level", ["thread", "resource"])
async def test_a_threads_attributes_are_not_listed_to_its_siblings(anyio_backend: str, record_level: str) -> None:
    clock = FakeClock(start=datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          knowledge={"curate_max_age_s": None, "record_level": record_level})
    async with Knowledge.in_memory(clock=clock) as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge, clock=clock) as memory:
            assert memory.knowledge_agents is not None
            t1 = memory.knowledge_agents.scope(None, "alice", "t1").key
            t2 = memory.knowledge_agents.scope(None, "alice", "t2").key

            async def seen_from_t2() -> list[str]:
                seen = [hit.text for hit in await knowledge.search("divorce lawyer", t2)]
                seen += [f"{n.name} {n.content or ''} {n.description or ''}"
                         for n in (await knowledge.store.list_nodes(t2, limit=100)).items]
                return seen

            await say(memory, clock, "t2", "My phone number is +49 151 5550 7720.")
            await memory.curate_knowledge("t2")
            await say(memory, clock, "t1", "My divorce lawyer is called Dr. Weiss.")
            await memory.curate_knowledge("t1")
            for moment in ("after t1's curation", "after t2's"):
                seen = await seen_from_t2()
                if record_level == "thread":
                    assert not any("divorce" in text for text in seen), (moment, seen)
                else:  # stored for the whole resource: every thread of it may know the attribute
                    assert any("divorce lawyer name" in text for text in seen), (moment, seen)
                await say(memory, clock, "t2", "Let's plan a birthday party for Ida.")
                await memory.curate_knowledge("t2")
            guidance = await knowledge.store.resolve_node(CAPTURE_GUIDANCE, t2)
            # Each thread's own capture still gets its attributes listed.
            assert guidance is not None and "phone number" in (guidance.content or "")
            own = await knowledge.store.resolve_node(CAPTURE_GUIDANCE, t1)
            assert own is not None and "divorce lawyer name" in (own.content or "")
            assert "phone number" not in (own.content or "") or record_level == "resource"
