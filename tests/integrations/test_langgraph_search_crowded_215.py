"""LangGraph store (helper 215): a query search in a namespace beside a busier one."""

from __future__ import annotations

import pytest

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE_T1 = "org:acme/resource:alice/thread:t1"


async def test_a_query_search_finds_its_namespaces_items_beside_a_busier_namespace() -> None:
    """A store serving several users by namespace (LangGraph's docs: ``(user_id, "memories")``):
    Bob's many notes about coffee hid Alice's one from her own namespace's search. Before: the
    store asked the knowledge search of its whole scope for 200 hits and kept those of the
    namespace; all 200 were Bob's, so Alice's search found nothing."""
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        for i in range(220):
            await store.aput(("bob", "memories"), f"note-{i}", {"text": f"coffee coffee, coffee at nine ({i})"})
        await store.aput(("alice", "memories"), "drink", {"text": "Alice drinks coffee with oat milk every morning"})
        await store.aput(("alice", "memories"), "city", {"text": "Alice lives in Lyon"})
        found = await store.asearch(("alice", "memories"), query="coffee", limit=10)
        assert [(item.namespace, item.key) for item in found] == [(("alice", "memories"), "drink")]
        assert found[0].value == {"text": "Alice drinks coffee with oat milk every morning"}
        # positive control: Bob's own search is served from the top of the same ranking
        assert len(await store.asearch(("bob", "memories"), query="coffee", limit=10)) == 10
