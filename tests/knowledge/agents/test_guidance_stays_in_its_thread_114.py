"""Scope ceilings, from the user's side: what one thread said never surfaces in a sibling thread,
not even as the attribute names the curate agent lists in its ``capture-guidance`` node.

Before: Alice told thread t1 "My divorce lawyer is called Dr. Weiss" (a thread-scoped record);
after curation, a search from her other thread t2 for "divorce lawyer" returned the resource's
capture-guidance node, "Attributes in use for User: divorce lawyer name. …", and so did t2's
node listing and the LLM capture prompt there.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.knowledge.agents.curate import CAPTURE_GUIDANCE

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio


async def say(memory: Memory, clock: FakeClock, thread: str, text: str) -> None:
    await said(memory, clock, text, after_s=3600, thread=thread)


@pytest.mark.parametrize("record_level", ["thread", "resource"])
async def test_a_threads_attributes_are_not_listed_to_its_siblings(anyio_backend: str, record_level: str) -> None:
    async with alice_memory(record_level=record_level) as (memory, knowledge, clock):
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
