"""LangGraph store: a search with a query asking for a large page, or a page far down (helper-171).

``asearch(namespace, query=..., limit=300)`` (or ``offset=250``) raised ``InvalidInputError: limit
must be between 1 and 1000 (got 1204)``, a limit the user never passed: the store asked the
knowledge search for four times the page's end. Now it asks for at most what that search gives.
"""

from __future__ import annotations

import pytest

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio


async def test_a_large_or_far_page_of_a_query_search_is_answered() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope="org:acme/resource:alice/thread:t1", ceiling="resource")
        for i in range(30):
            await store.aput(("memories",), f"k{i}", {"text": f"fact {i} about Paris"})
        assert len(await store.asearch(("memories",), query="Paris", limit=10)) == 10
        large = await store.asearch(("memories",), query="Paris", limit=300)
        assert sorted(hit.key for hit in large) == sorted(f"k{i}" for i in range(30))
        assert await store.asearch(("memories",), query="Paris", offset=250, limit=10) == []
        tail = await store.asearch(("memories",), query="Paris", offset=25, limit=300)
        assert len(tail) == 5
