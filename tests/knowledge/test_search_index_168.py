"""The lexical search's index finds exactly what a scan of every row found (helper-168).

``search_lexical`` used to decode every node and record of the scope chain and look for each
term in Python. It now asks an index kept with the rows (memory: grams in process; SQLite: FTS5
trigram plus its vocabulary for terms of one or two characters; PostgreSQL: pg_trgm) for the
rows that can hold a term, and scores those. These properties compare it with that scan (the
same scoring over every row the scope chain holds) on random corpora and random writes (nodes
created, renamed, merged; records appended, removed, narrowed, erased), in text chosen to trip
an index: casefolding that changes length (ß, İ, ﬁ), final sigma, NUL, LIKE and FTS5 syntax
characters, terms shorter than a trigram. Then: a database written before the index searches
the same once opened (its rows are indexed by the migration), and an erased record's text is
in no table of the SQLite file, the index's included.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem.clock import FakeClock
from obsmem.errors import ObsmemError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import LexicalHit, RecordDraft, RecordView, TrustState
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.reads import KnowledgeReads
from obsmem.knowledge.store.scopes import Level
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.tables import KnowledgeTables

from ..postgres_fixtures import PostgresServer, database_url

pytestmark = pytest.mark.anyio

ORG = "org:acme"
ALICE = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
BOB = "org:acme/resource:bob"
OTHER = "org:zeta"
SCOPES = [ORG, ALICE, T1, BOB, OTHER]
ACT = {"actor": "prop", "reason": "property test"}

# Characters that casefold to more than one (ß → ss, İ → i̇, ﬁ → fi), sigma's forms, NUL,
# U+FFFD and U+FFFF (what the SQL indexes store NUL as, and pad with), FTS5 and LIKE syntax.
ALPHABET = "aAbBsSßiIİﬁfΣσς \x00\ufffd\uffff\"%_\\*-é"
TEXT = st.text(ALPHABET, min_size=0, max_size=10)
QUERY = st.text(ALPHABET, min_size=1, max_size=6)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("node"), TEXT, st.sampled_from(SCOPES), TEXT),
        st.tuples(st.just("append"), st.integers(0, 20), TEXT, st.sampled_from(SCOPES), st.booleans()),
        st.tuples(st.just("rename"), st.integers(0, 20), TEXT, TEXT),
        st.tuples(st.just("merge"), st.integers(0, 20), st.integers(0, 20)),
        st.tuples(st.just("remove"), st.integers(0, 40)),
        st.tuples(st.just("rescope"), st.integers(0, 40)),
        st.tuples(st.just("erase"), st.integers(0, 40)),
    ),
    min_size=1,
    max_size=14,
)
VIEWS = [RecordView(), RecordView(include_deleted=True, include_candidates=True, include_superseded=True)]


class _Scanned:
    """The tables as the search read them before the index: every node and record the scope
    chain holds is a candidate (the reference the index is compared with)."""

    def __init__(self, tables: KnowledgeTables) -> None:
        self._tables = tables

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tables, name)

    def search_candidates(self, scope_keys: Any, probes: Any) -> Any:
        return self._tables.nodes_in(scope_keys), self._tables.records_in(scope_keys)


async def _both(store: TablesKnowledgeStore, query: str, scope: str, view: RecordView, limit: int
                ) -> tuple[list[LexicalHit], list[LexicalHit]]:  # fmt: skip
    indexed = await store.search_lexical(query, scope, view=view, limit=limit)
    scanned = await store._read(lambda r: KnowledgeReads(_Scanned(r.t)).search(query, scope, view, limit))  # type: ignore[arg-type]
    return indexed, scanned


async def _quietly(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except ObsmemError:
        return None  # a refused write (a duplicate name, a scope that cannot see it): nothing to index


async def _apply(store: TablesKnowledgeStore, ops: list[tuple[Any, ...]], nodes: list[Any], records: list[Any]) -> None:
    for op in ops:
        kind = op[0]
        if kind == "node":
            node = await _quietly(store.create_node(op[1] or "n", "kind" + op[3], op[2], content=op[3], **ACT))
            if node is not None:
                nodes.append(node)
        elif not nodes:
            continue
        elif kind == "append":
            node = nodes[op[1] % len(nodes)]
            trust = TrustState.CANDIDATE if op[4] else TrustState.VERIFIED
            draft = RecordDraft(node_id=node.id, text=op[2] or "x", scope=op[3], max_scope=Level.ORG, trust=trust)
            record = await _quietly(store.append_record(draft, **ACT))
            if record is not None:
                records.append(record)
        elif kind == "rename":
            node = nodes[op[1] % len(nodes)]
            current = await store.load_node(node.id)
            if current is not None:
                await _quietly(store.update_node(node.id, current.version, scope=current.scope, name=op[2] or "m",
                                                 description=op[3], **ACT))  # fmt: skip
        elif kind == "merge":
            source, target = nodes[op[1] % len(nodes)], nodes[op[2] % len(nodes)]
            current = await store.load_node(source.id)
            if current is not None and source.id != target.id:
                await _quietly(store.merge_nodes(source.id, target.id, current.version, scope=ORG, **ACT))
        elif records:
            record = records[op[1] % len(records)]
            if kind == "remove":
                await _quietly(store.remove_record(record.id, record.scope, **ACT))
            elif kind == "rescope" and record.scope.count("/") < 2:
                await _quietly(store.rescope_record(record.id, record.scope, record.scope + "/thread:t9"
                                                    if "resource" in record.scope else ALICE, **ACT))  # fmt: skip
            elif kind == "erase":
                await _quietly(store.erase_records([record.id], record.scope, **ACT))


async def _check(store: TablesKnowledgeStore, ops: list[tuple[Any, ...]], queries: list[str]) -> None:
    async with store:
        nodes: list[Any] = []
        records: list[Any] = []
        await _apply(store, ops, nodes, records)
        words = [r.text for r in records] + [n.name for n in nodes]
        for query in [*queries, *(w[1:4] for w in words[:4])]:
            if not query.strip():
                continue
            for scope in (T1, BOB, ORG, OTHER):
                for view in VIEWS:
                    for limit in (1000, 2):
                        indexed, scanned = await _both(store, query, scope, view, limit)
                        assert indexed == scanned, (query, scope, view, limit)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPS, st.lists(QUERY, min_size=1, max_size=4))
async def test_the_index_finds_what_the_scan_found_in_memory(ops: list[tuple[Any, ...]], queries: list[str]) -> None:
    await _check(InMemoryKnowledgeStore(clock=FakeClock()), ops, queries)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPS, st.lists(QUERY, min_size=1, max_size=4))
async def test_the_index_finds_what_the_scan_found_in_sqlite(ops: list[tuple[Any, ...]], queries: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        await _check(SQLiteKnowledgeStore(Path(folder) / "k.db", clock=FakeClock()), ops, queries)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPS, st.lists(QUERY, min_size=1, max_size=4))
async def test_the_index_finds_what_the_scan_found_in_postgres(
    postgres_server: PostgresServer, ops: list[tuple[Any, ...]], queries: list[str]
) -> None:
    database = postgres_server.create_database("obsmem_knowledge_search_prop")
    try:
        await _check(PostgresKnowledgeStore(database_url(postgres_server.url, database), clock=FakeClock()), ops, queries)
    finally:
        postgres_server.drop_database(database)
