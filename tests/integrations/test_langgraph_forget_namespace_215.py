"""LangGraph store (helper 215): forgetting a value that a namespace's label holds (a phone
number or account id the app files memories under) leaves no copy of it.

Before: the namespace's knowledge node was named by the namespace in hex, which forgetting does
not read: the node kept the value (hex-spelled) in the database, in its name and search text,
while its listed name and metadata were scrubbed, so the namespace was no longer listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import InvalidInputError, Memory
from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE_T1 = "org:acme/resource:alice/thread:t1"
PHONE = "555-0134-7788"


def copies(folder: Path) -> dict[str, int]:
    """How often the database files hold the value, as written or hex-spelled."""
    spellings = (PHONE.encode(), PHONE.encode().hex().encode(), PHONE.encode().hex().upper().encode())
    return {p.name: sum(p.read_bytes().count(s) for s in spellings) for p in folder.iterdir() if p.is_file()}


async def test_forgetting_a_value_a_namespace_label_holds_leaves_no_copy(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    folder.mkdir()
    async with Knowledge.sqlite(folder / "k.db") as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        await store.aput(("contacts", PHONE), "name", {"text": "the plumber"})
        await store.aput(("contacts", "office"), "name", {"text": "the front desk"})
        async with Memory("memory://", knowledge=knowledge) as memory:
            await memory.create_thread("t1", resource_id="alice", org_id="acme")
            await memory.forget(PHONE, resource_id="alice")
        assert await store.aget(("contacts", PHONE), "name") is None
        assert await store.alist_namespaces() == [("contacts", "office")]
        assert [i.value for i in await store.asearch(("contacts",))] == [{"text": "the front desk"}]
        assert not any(copies(folder).values()), f"copies of the forgotten value while open: {copies(folder)}"
        # the store goes on: another namespace is written and read as before
        await store.aput(("contacts", "home"), "name", {"text": "my sister"})
        again = await store.aget(("contacts", "home"), "name")
        assert again is not None and again.value == {"text": "my sister"}
    assert not any(copies(folder).values()), f"copies of the forgotten value after closing: {copies(folder)}"


async def test_namespaces_stored_before_keep_their_items_and_case_keeps_namespaces_apart() -> None:
    """A namespace node an earlier version named (the namespace in hex) is still found: its items
    are read, updated and listed; namespaces differing only in case stay two."""
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        earlier = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        earlier._node_name = KnowledgeBaseStore._hex_node_name  # type: ignore[method-assign]
        await earlier.aput(("memories",), "city", {"text": "Lyon"})
        item = await store.aget(("memories",), "city")
        assert item is not None and item.value == {"text": "Lyon"}
        await store.aput(("memories",), "city", {"text": "Paris"})
        await store.aput(("memories",), "food", {"text": "peanuts"})
        assert {i.key: i.value["text"] for i in await store.asearch(("memories",))} == {"city": "Paris", "food": "peanuts"}
        assert await store.alist_namespaces() == [("memories",)]  # one node: the earlier one
        await store.aput(("Memories",), "city", {"text": "Berlin"})
        assert (await store.aget(("Memories",), "city")).value == {"text": "Berlin"}  # type: ignore[union-attr]
        assert (await store.aget(("memories",), "city")).value == {"text": "Paris"}  # type: ignore[union-attr]
        assert await store.alist_namespaces() == [("Memories",), ("memories",)]


async def test_a_namespace_label_that_is_not_unicode_is_refused_with_obsmems_error() -> None:
    """A label holding half an emoji (a lone surrogate): the node's name holds the labels as
    written, and encoding it raised UnicodeEncodeError (after fdfc84c); the put was refused with
    InvalidInputError before that, as obsmem refuses such text everywhere."""
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            await store.aput(("contacts", "half \ud83d"), "name", {"text": "x"})
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            await store.aget(("contacts", "half \ud83d"), "name")
        assert await store.alist_namespaces() == []
