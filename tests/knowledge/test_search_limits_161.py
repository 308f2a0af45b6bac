"""``Knowledge.search`` takes any limit the store's reads take (1 to 1,000) (helper-161).

The fused search asks the lexical and the semantic side for three times the limit, and the
store refuses a read of more than 1,000: ``search(limit=334)`` failed with "limit must be between
1 and 1000 (got 1002)", a limit it was never given. LangGraph's ``store.asearch(ns, query=…,
limit=100)`` asks for (100 x 4) and failed the same way; ``search(limit=0)`` answered nothing
instead of refusing the limit.
"""

from __future__ import annotations

import pytest

from obsmem.errors import InvalidInputError
from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

SCOPE = "org:acme/resource:alice/thread:t1"


async def test_every_allowed_limit_searches() -> None:
    async with Knowledge.in_memory() as knowledge:
        user = await knowledge.node("User", "person", SCOPE)
        for i in range(5):
            await knowledge.append(user.id, f"likes tea number {i}", SCOPE, reason="said")
        for limit in (1, 3, 334, 500, 1000):
            hits = await knowledge.search("tea", SCOPE, limit=limit)
            assert len(hits) == min(limit, 5), limit
        for limit in (0, 1001):
            with pytest.raises(InvalidInputError, match=f"got {limit}"):
                await knowledge.search("tea", SCOPE, limit=limit)


async def test_a_langgraph_search_of_a_hundred_items() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=SCOPE, ceiling="resource")
        for i in range(3):
            await store.aput(("memories",), f"k{i}", {"drink": f"green tea {i}"})
        hits = await store.asearch(("memories",), query="green tea", limit=100)
        assert sorted(h.key for h in hits) == ["k0", "k1", "k2"]
