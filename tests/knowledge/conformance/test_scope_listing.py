"""``list_scopes``: the scope keys the store holds rows at, for erasures that have no live thread
left to name them (``obsmem.knowledge.lifecycle.stored_scopes``). On main the method did not
exist (``AttributeError``), and erasure looked at live threads only."""

from __future__ import annotations

import pytest

from obsmem.errors import InvalidScopeError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft

from .conftest import ACT

pytestmark = pytest.mark.anyio


async def _fact(store: TablesKnowledgeStore, scope: str, name: str = "User") -> None:
    node = await store.resolve_node(name, scope)
    if node is None or node.scope != scope:
        node = await store.create_node(name, "person", scope, **ACT)
    await store.append_record(RecordDraft(node_id=node.id, text=f"a fact at {scope}", scope=scope), **ACT)


async def test_every_scope_with_a_row_is_listed_and_a_resource_exactly(kstore: TablesKnowledgeStore) -> None:
    assert await kstore.list_scopes() == []
    alice = ["org:acme/resource:alice", "org:acme/resource:alice/thread:t1:sub", "org:globex/resource:alice"]
    others = ["org:acme", "org:acme/resource:Alice", "org:acme/resource:al_ce", "org:acme/resource:al%ce",
              "org:acme/resource:a!ice", "org:acme/resource:bob/thread:alice"]  # fmt: skip
    for scope in alice + others:
        await _fact(kstore, scope)
    await kstore.forget_value("nothing stored holds this", "org:zed/resource:alice", **ACT)  # a digest only

    listed = await kstore.list_scopes()
    assert set(alice + others) | {"org:zed/resource:alice"} <= set(listed) and listed == sorted(listed)
    assert await kstore.list_scopes(resource="alice") == sorted([*alice, "org:zed/resource:alice"])
    # LIKE's wildcards and escape character, and case, are taken literally
    assert await kstore.list_scopes(resource="al_ce") == ["org:acme/resource:al_ce"]
    assert await kstore.list_scopes(resource="al%ce") == ["org:acme/resource:al%ce"]
    assert await kstore.list_scopes(resource="a!ice") == ["org:acme/resource:a!ice"]
    assert await kstore.list_scopes(resource="Alice") == ["org:acme/resource:Alice"]
    assert await kstore.list_scopes(resource="nobody") == []
    with pytest.raises(InvalidScopeError):
        await kstore.list_scopes(resource="a/b")
