"""Paging through a scope's nodes (``list_nodes``: ``/ui/knowledge``, the REST node list) reads
about a page per page, on every knowledge adapter.

On main each page read and decoded every node the scope sees, then sorted them: 0.5 s a page
at 17,000 nodes, so paging through them all was quadratic. A page now walks the
``(scope, name_key)`` index of each scope level the caller sees, from the cursor on, and
merges those runs: what it decodes is about what it shows. The work is counted (node documents
decoded, or copied out of the in-memory dev store), not timed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

from obsmem.errors import InvalidInputError
from obsmem.knowledge.store import memory as memory_tables
from obsmem.knowledge.store import sql_tables
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import Node
from obsmem.knowledge.store.scopes import Scope

from .world import ACT, ORG, RES, T1, T2

pytestmark = pytest.mark.anyio


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How many node documents the store decoded (SQL) or copied out (in memory)."""
    seen: Counter[str] = Counter()
    load, clone = sql_tables._load, memory_tables._clone

    def counted_load(cls: type, doc: str) -> object:
        if cls is Node:
            seen["nodes"] += 1
        return load(cls, doc)

    def counted_clone(value: object) -> object:
        if isinstance(value, Node):
            seen["nodes"] += 1
        return clone(value)

    monkeypatch.setattr(sql_tables, "_load", counted_load)
    monkeypatch.setattr(memory_tables, "_clone", counted_clone)
    yield seen


async def _walk(kstore: TablesKnowledgeStore, scope: str, limit: int, **filters: str) -> list[list[Node]]:
    pages: list[list[Node]] = []
    cursor: str | None = None
    while True:
        page = await kstore.list_nodes(scope, limit=limit, after=cursor, **filters)
        pages.append(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 1_000


async def test_a_page_decodes_about_a_page_not_every_node(kstore: TablesKnowledgeStore, decoded: Counter[str]) -> None:
    for i in range(240):  # three scope levels the thread sees, names interleaved between them
        scope = (ORG, RES, T1)[i % 3]
        await kstore.create_node(f"node {i:03d}", "thing", scope, **ACT)
    limit = 10
    decoded.clear()
    pages = await _walk(kstore, T1, limit)
    assert [n.name for page in pages for n in page] == [f"node {i:03d}" for i in range(240)]
    # Each scope level the thread sees (thread, resource, org) reads at most a page and two
    # more (one to tell whether a next page exists, one for the cursor's own node): 3 × 12 = 36
    # a page. On main every page decoded all 240: 5,760 in all for the 24 pages.
    levels = len(Scope.parse(T1).visible_keys())
    assert decoded["nodes"] <= len(pages) * levels * (limit + 2), decoded


async def test_paging_keeps_order_filters_and_cursor_across_scope_levels(kstore: TablesKnowledgeStore) -> None:
    """Same names at several levels (ordered by id among themselves), merged nodes left out,
    a kind filter far sparser than a page, a prefix filter, a sibling thread's nodes unseen."""
    made: list[Node] = []
    for i in range(60):
        for scope in (ORG, RES, T1):
            if (i + len(scope)) % 2:
                kind = "place" if i % 13 == 0 else "person"
                made.append(await kstore.create_node(f"Name {i % 25:02d} {scope[-3:]}{i}", kind, scope, **ACT))
    await kstore.create_node("Name 00 sibling", "person", T2, **ACT)
    for twin in ("Twin", "twin ", "TWIN"):  # one name key at three levels
        made.append(await kstore.create_node(twin, "person", (ORG, RES, T1)[len(made) % 3], **ACT))
    source = next(n for n in made if n.scope == T1)
    target = next(n for n in made if n.scope == RES)
    merged = await kstore.merge_nodes(source.id, target.id, source.version, scope=T1, **ACT)
    assert merged is not None
    shown = [n for n in made if n.id != source.id]

    def order(node: Node) -> tuple[str, str]:
        return (node.name.strip().casefold(), node.id)

    for limit in (1, 7, 100):
        names = [n.id for page in await _walk(kstore, T1, limit) for n in page]
        assert names == [n.id for n in sorted(shown, key=order)]
        places = [n.id for page in await _walk(kstore, T1, limit, kind="place") for n in page]
        assert places == [n.id for n in sorted(shown, key=order) if n.kind == "place"]
        prefixed = [n.id for page in await _walk(kstore, T1, limit, name_prefix="name 1") for n in page]
        assert prefixed == [n.id for n in sorted(shown, key=order) if order(n)[0].startswith("name 1")]
        assert prefixed


@pytest.mark.parametrize("cursor", ["not json", "[1]", '["a"]', '["a", 2]', "{}", '"ab"'])
async def test_a_cursor_list_nodes_did_not_give_is_refused(kstore: TablesKnowledgeStore, cursor: str) -> None:
    await kstore.create_node("Alpha", "person", RES, **ACT)
    with pytest.raises(InvalidInputError, match="Invalid node cursor"):
        await kstore.list_nodes(T1, after=cursor)
    # On main '[1]' failed with a TypeError and the others were taken as cursors. One of the
    # shape list_nodes gives, (name key, id), is taken: the nodes after it.
    assert [n.name for n in (await kstore.list_nodes(T1, after=json.dumps(["alpha", ""]))).items] == ["Alpha"]
    assert (await kstore.list_nodes(T1, after=json.dumps(["alpha", "~"]))).items == []
