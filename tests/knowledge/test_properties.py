"""Property tests over random sequences of knowledge operations (in-memory, SQLite, PostgreSQL).

Three invariants the store must keep whatever the caller does:

1. no record is ever stored above its ceiling;
2. a tombstoned value is never returned by a default read, and capturing it again is refused;
3. after the outbox is drained, the index holds exactly one vector per live record, under the
   record's current scope (and none for deleted or rejected records).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import InvalidInputError, NotFoundError, TombstonedValueError
from obsmem.knowledge import SemanticIndex
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft, TrustState, record_document_id
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.ops import tombstone_blocks
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.values import normalise_value

from ..postgres_fixtures import PostgresServer, database_url

pytestmark = pytest.mark.anyio

SCOPES = [
    "org:acme",
    "org:acme/resource:alice",
    "org:acme/resource:alice/thread:t1",
    "org:acme/resource:alice/thread:t2",
]
TEXTS = [
    "Jane lives in Paris",
    "jane lives in paris.",
    "Jane likes tea",
    "Jane works at Acme",
    "Jane is on call",
]


class Act(TypedDict):
    actor: str
    reason: str


ACT: Act = {"actor": "prop", "reason": "property test"}


@dataclass(frozen=True)
class Append:
    text: int
    scope: int
    ceiling: Level
    candidate: bool


@dataclass(frozen=True)
class Rescope:
    record: int
    acting: int | None  # None: act from the record's own scope
    target: int


@dataclass(frozen=True)
class RaiseCeiling:
    record: int
    acting: int | None  # None: act from the record's own scope
    ceiling: Level


@dataclass(frozen=True)
class Remove:
    record: int
    acting: int | None  # None: act from the record's own scope
    tombstone: bool


@dataclass(frozen=True)
class Restore:
    record: int
    acting: int | None  # None: act from the record's own scope


@dataclass(frozen=True)
class Review:
    record: int
    acting: int | None  # None: act from the record's own scope
    approve: bool
    tombstone: bool


@dataclass(frozen=True)
class Tombstone:
    text: int
    scope: int


@dataclass(frozen=True)
class Drain:
    pass


_i = st.integers(0, 9)
_scope = st.integers(0, len(SCOPES) - 1)
_level = st.sampled_from(list(Level))
_acting = st.one_of(st.none(), _scope)
OPERATIONS = st.lists(
    st.one_of(
        st.builds(Append, st.integers(0, len(TEXTS) - 1), _scope, _level, st.booleans()),
        st.builds(Rescope, _i, _acting, _scope),
        st.builds(RaiseCeiling, _i, _acting, _level),
        st.builds(Remove, _i, _acting, st.booleans()),
        st.builds(Restore, _i, _acting),
        st.builds(Review, _i, _acting, st.booleans(), st.booleans()),
        st.builds(Tombstone, st.integers(0, len(TEXTS) - 1), _scope),
        st.just(Drain()),
    ),
    min_size=5,
    max_size=30,
)

EXPECTED_REFUSALS = (InvalidInputError, NotFoundError, TombstonedValueError)


async def _apply(store: TablesKnowledgeStore, node_id: str, records: list[str], op: object) -> None:
    async def pick(index: int) -> str | None:
        """A record the operation can act on when there is one (a candidate to review, a deleted
        record to restore), so that most generated operations succeed instead of being refused."""
        pool = records
        if isinstance(op, Review | Restore):
            loaded = [await store.load_record(rid) for rid in records]
            suitable = [
                r.id
                for r in loaded
                if r is not None
                and (r.trust is TrustState.CANDIDATE if isinstance(op, Review) else r.deleted_at is not None)
            ]
            pool = suitable or records
        return pool[index % len(pool)] if pool else None

    try:
        if isinstance(op, Append):
            trust = TrustState.CANDIDATE if op.candidate else TrustState.VERIFIED
            made = await store.append_record(
                RecordDraft(node_id, TEXTS[op.text], SCOPES[op.scope], max_scope=op.ceiling, trust=trust),
                **ACT,
            )
            records.append(made.id)
        elif isinstance(op, Tombstone):
            await store.add_tombstone(node_id, SCOPES[op.scope], TEXTS[op.text], **ACT)
        elif isinstance(op, Drain):
            await SemanticIndex(store, LexicalHashEmbedder(32), worker_id="prop").drain()
        elif (record_id := await pick(op.record)) is not None:  # type: ignore[attr-defined]
            acting = await _acting_scope(store, record_id, op)
            if isinstance(op, Rescope):
                await store.rescope_record(record_id, acting, SCOPES[op.target], **ACT)
            elif isinstance(op, RaiseCeiling):
                await store.raise_ceiling(record_id, acting, op.ceiling, privileged=True, **ACT)
            elif isinstance(op, Remove):
                await store.remove_record(record_id, acting, tombstone=op.tombstone, **ACT)
            elif isinstance(op, Restore):
                await store.restore_record(record_id, acting, **ACT)
            elif isinstance(op, Review):
                trust = TrustState.VERIFIED if op.approve else TrustState.REJECTED
                await store.set_trust(record_id, acting, trust, tombstone=op.tombstone, **ACT)
    except EXPECTED_REFUSALS:
        pass


async def _acting_scope(store: TablesKnowledgeStore, record_id: str, op: object) -> str:
    """The scope an operation acts from: a random one, or one that can see the record (and target)."""
    index: int | None = op.acting  # type: ignore[attr-defined]
    if index is not None:
        return SCOPES[index]
    record = await store.load_record(record_id)
    assert record is not None
    if isinstance(op, Rescope) and Scope.parse(SCOPES[op.target]).sees(record.scope):
        return SCOPES[op.target]  # moving down: act from the narrower target
    return record.scope


async def _check_invariants(store: TablesKnowledgeStore, node_id: str, records: list[str]) -> None:
    stored = [r for r in [await store.load_record(rid) for rid in records] if r is not None]
    assert len(stored) == len(records)
    # 1. ceilings
    for record in stored:
        assert Scope.parse(record.scope).level >= record.max_scope, record
    # 2. tombstones: never read by default, never re-captured
    tombstones = await store.list_tombstones(SCOPES[2]) + await store.list_tombstones(SCOPES[3])
    for scope in SCOPES:
        readable = (await store.list_about(node_id, scope)).items
        readable += [h.record for h in await store.search_lexical("jane", scope) if h.record is not None]
        for record in readable:
            value = normalise_value(record.text)
            assert not any(tombstone_blocks(t, node_id, record.scope, value) for t in tombstones), record
    for tombstone in {(t.scope, t.value) for t in tombstones}:
        with pytest.raises(TombstonedValueError):
            await store.append_record(RecordDraft(node_id, tombstone[1], tombstone[0]), **ACT)


async def _check_index(store: TablesKnowledgeStore, records: list[str]) -> None:
    await SemanticIndex(store, LexicalHashEmbedder(32), worker_id="final").drain()
    live = {}
    for record_id in records:
        record = await store.load_record(record_id)
        assert record is not None
        if record.deleted_at is None and record.trust is not TrustState.REJECTED:
            live[record_document_id(record.id)] = record.scope
    vectors = await store.list_vectors()
    assert len(vectors) == len({v.document_id for v in vectors})  # one per document
    assert {v.document_id: v.scope for v in vectors} == live


async def _run(store: TablesKnowledgeStore, operations: list[object]) -> None:
    async with store:
        node = await store.create_node("Jane", "person", SCOPES[0], **ACT)
        records: list[str] = []
        seed = [
            Append(0, 2, Level.THREAD, False),
            Append(2, 1, Level.RESOURCE, False),
            Append(3, 3, Level.ORG, True),
            Append(4, 0, Level.ORG, False),
        ]
        for op in [*seed, *operations]:
            await _apply(store, node.id, records, op)
            await _check_invariants(store, node.id, records)
        await _check_index(store, records)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPERATIONS)
async def test_invariants_hold_in_memory(operations: list[object]) -> None:
    await _run(InMemoryKnowledgeStore(clock=FakeClock()), operations)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPERATIONS)
async def test_invariants_hold_in_sqlite(operations: list[object]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        await _run(SQLiteKnowledgeStore(Path(folder) / "k.db", clock=FakeClock()), operations)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPERATIONS)
async def test_invariants_hold_in_postgres(postgres_server: PostgresServer, operations: list[object]) -> None:
    database = postgres_server.create_database("obsmem_knowledge_prop")
    try:
        url = database_url(postgres_server.url, database)
        await _run(PostgresKnowledgeStore(url, clock=FakeClock()), operations)
    finally:
        postgres_server.drop_database(database)
