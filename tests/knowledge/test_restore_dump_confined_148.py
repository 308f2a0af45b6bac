"""``KnowledgeStore.restore_dump(dump, subtree=...)`` writes only rows on the subtree's chain or
below it.

The contract restores a scope's export: its rows under ``subtree`` and the org's above it. A row of
another resource (an export edited, or restored under the wrong user) was written where it said,
into that other user's scope: restoring into bob's subtree planted a record alice then read as
hers. ``obsmem import`` checks this before it calls the store; the store must refuse it too (every
path enforces scopes), writing nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"
BOB = "org:acme/resource:bob"


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_row_outside_the_subtree_is_refused_and_nothing_written(tmp_path: Path, kind: str) -> None:
    async with Knowledge.in_memory() as source:
        node = await source.node("Jane", "person", ALICE)
        await source.append(node.id, "planted into alice", ALICE, reason="edited export")
        dump = await source.store.dump_scope(ALICE)
    target = Knowledge.sqlite(tmp_path / "k.db") if kind == "sqlite" else Knowledge.in_memory()
    async with target:
        with pytest.raises(InvalidInputError, match="outside"):
            await target.store.restore_dump(dump, subtree=BOB)
        alice_sees = [r.text for r in (await target.store.list_about(node.id, ALICE)).items]
        nodes = (await target.store.list_nodes(ALICE)).items
    assert alice_sees == [] and nodes == []
