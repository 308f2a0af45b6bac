"""LangGraph's BaseStore over obsmem knowledge: every key is its own item (helper-141).

The store spells a key that is not already casefolded as ``"hex:" + hex(key)`` (the knowledge
store casefolds attributes). A key that itself reads ``"hex:…"`` was kept as it was, so the keys
``"A"`` and ``"hex:41"`` shared one attribute: putting one replaced the other, and ``get("A")``
returned the other item (with the other key). A graph node that stores items under ids it gets
from elsewhere (a hash, an encoded id) can meet such a pair.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge, RecordDraft

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice/thread:t1"
PAIRS = [("A", "hex:41"), ("Theme", "hex:5468656d65"), ("Ünï", "hex:c39c6ec3af")]


class State(TypedDict):
    keys: list[str]
    found: dict[str, Any]


def _graph(store: KnowledgeBaseStore) -> Any:
    """Puts one item per key (its value names its key), then reads each key back, through the runtime store."""

    async def put(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        for key in state["keys"]:
            await runtime.store.aput(("kv",), key, {"for": key})
        return {}

    async def get(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        found: dict[str, Any] = {}
        for key in state["keys"]:
            item = await runtime.store.aget(("kv",), key)
            found[key] = None if item is None else (item.key, item.value["for"])
        return {"found": found}

    builder = StateGraph(State)
    builder.add_node("put", put)
    builder.add_node("get", get)
    builder.add_edge(START, "put")
    builder.add_edge("put", "get")
    builder.add_edge("get", END)
    return builder.compile(store=store)


@pytest.mark.parametrize(("plain", "spelled"), PAIRS)
async def test_a_key_that_reads_like_a_spelled_key_is_its_own_item(plain: str, spelled: str) -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE)
        result = await _graph(store).ainvoke({"keys": [plain, spelled], "found": {}})
        assert result["found"] == {plain: (plain, plain), spelled: (spelled, spelled)}
        listed = sorted((i.key, i.value["for"]) for i in await store.asearch(("kv",)))
        assert listed == sorted([(plain, plain), (spelled, spelled)])
        # deleting one leaves the other
        await store.adelete(("kv",), spelled)
        assert await store.aget(("kv",), spelled) is None
        kept = await store.aget(("kv",), plain)
        assert kept is not None and kept.value == {"for": plain}


async def test_an_item_stored_under_its_key_as_it_was_is_read_updated_and_deleted() -> None:
    """A ``"hex:…"`` key put before such keys were spelled (its attribute is the key itself)."""
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE)
        await store.aput(("kv",), "other", {"for": "other"})  # makes the namespace node
        node = await store._node(("kv",), store.default_scope, create=False)
        assert node is not None
        scope = store.default_scope.key
        await knowledge.store.append_record(
            RecordDraft(node.id, '{"for": "hex:41"}', scope, max_scope=store.ceiling, attribute="hex:41",
                        metadata={"langgraph": {"key": "hex:41", "value": {"for": "old"}, "created_at": None}}),
            actor=knowledge.actor, reason="an item as an earlier version stored it",
        )
        item = await store.aget(("kv",), "hex:41")
        assert item is not None and item.value == {"for": "old"}
        await store.aput(("kv",), "hex:41", {"for": "new"})
        item = await store.aget(("kv",), "hex:41")
        assert item is not None and item.value == {"for": "new"}
        assert sorted(i.key for i in await store.asearch(("kv",))) == ["hex:41", "other"]
        await store.aput(("kv",), "A", {"for": "A"})  # the key it once shared an attribute with
        assert (await store.aget(("kv",), "hex:41")).value == {"for": "new"}  # type: ignore[union-attr]
        assert (await store.aget(("kv",), "A")).value == {"for": "A"}  # type: ignore[union-attr]
        await store.adelete(("kv",), "hex:41")
        assert await store.aget(("kv",), "hex:41") is None
        assert sorted(i.key for i in await store.asearch(("kv",))) == ["A", "other"]
