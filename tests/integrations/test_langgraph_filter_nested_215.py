"""LangGraph store (helper 215): ``filter`` matches values as LangGraph's own stores match them."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE_T1 = "org:acme/resource:alice/thread:t1"


VALUES: dict[str, dict[str, Any]] = {
    "a": {"meta": {"lang": "en", "source": "chat"}, "tags": ["x", "y"], "n": 3},
    "b": {"meta": {"lang": "fr", "source": "chat"}, "tags": ["x"], "n": 10},
    "c": {"meta": {"lang": "en"}, "n": 7},
}


@pytest.mark.parametrize("condition", [
    {"meta": {"lang": "en"}},                      # a nested object matches on the fields it names
    {"meta": {"source": "chat", "lang": "fr"}},
    {"meta": {"lang": {"$ne": "en"}}},             # an operator inside a nested object
    {"tags": ["x", "y"]},
    {"n": {"$gt": 5}},
    {"meta": {"lang": "en", "source": "chat"}},
])
async def test_filter_matches_as_langgraphs_own_store_does(condition: dict[str, Any]) -> None:
    """Before: a nested object in ``filter`` matched only a value equal to it as a whole
    (``{"meta": {"lang": "en"}}`` found nothing), where LangGraph's stores match the fields it names."""
    reference = InMemoryStore()
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        for key, value in VALUES.items():
            await reference.aput(("docs",), key, value)
            await store.aput(("docs",), key, value)
        expected = sorted(item.key for item in await reference.asearch(("docs",), filter=condition))
        assert expected, "the condition matches something in LangGraph's own store"
        assert sorted(item.key for item in await store.asearch(("docs",), filter=condition)) == expected
