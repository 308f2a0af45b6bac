"""The in-memory knowledge store: the reference adapter, and the one tests reach for first.

Rows are frozen pydantic models kept in dicts. A write takes a shallow snapshot of every dict
first and puts it back if the operation raises, so a failed write leaves nothing behind. The
operations themselves never await, so on one event loop each runs without interleaving.
Reads hand out deep copies: mutating a returned object never changes the store.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel

from obsmem.clock import Clock
from obsmem.errors import StoreClosedError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import (
    ActivityEvent,
    ForgottenValue,
    Node,
    OutboxEntry,
    Record,
    StoredVector,
    Tombstone,
    TrustState,
    record_document_id,
)
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.tables import (
    KnowledgeTables,
    RecordLabel,
    VectorLabel,
    name_key,
    node_order,
    node_search_text,
    record_search_text,
    under,
)

__all__ = ["InMemoryKnowledgeStore", "MemoryKnowledgeTables"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def _clone(model: M) -> M:
    return model.model_copy(deep=True)


R = TypeVar("R", Record, ActivityEvent, OutboxEntry)


def _page(rows: Iterable[R], wanted: Callable[[R], bool], after: str | None, limit: int | None, *,
          newest_first: bool) -> list[R]:  # fmt: skip
    """Copies of at most ``limit`` of the ``wanted`` rows in id order (``newest_first``:
    descending), beyond ``after`` in that order."""
    found = sorted(
        (r for r in rows if wanted(r) and (after is None or (r.id < after if newest_first else r.id > after))),
        key=lambda r: r.id,
        reverse=newest_first,
    )
    return [_clone(r) for r in found[:limit]]


def _at(scope: str, scope_keys: Sequence[str], below: str | None) -> bool:
    """Whether a row stored at ``scope`` is at one of ``scope_keys`` or strictly below ``below``."""
    return scope in scope_keys or (below is not None and scope.startswith(below + "/"))


def _clone_vector(vector: StoredVector) -> StoredVector:
    return replace(vector, vector=vector.vector.copy())


def _grams(text: str) -> set[str]:
    """Every substring of ``text`` of one to three characters: a probe of up to three is one of
    them exactly, a longer one holds each of its trigrams."""
    return {text[i : i + n] for n in (1, 2, 3) for i in range(len(text) - n + 1)}


class _SearchIndex:
    """The in-memory lexical index: each row's search text, and the rows holding each one- to
    three-character substring. A probe is looked up by its rarest gram and checked against the
    texts of those rows only."""

    def __init__(self) -> None:
        self.texts: dict[tuple[str, str], tuple[str, str]] = {}  # (kind, id) -> (scope, search text)
        self.rows: dict[str, set[tuple[str, str]]] = {}  # gram -> (kind, id) of the rows holding it
        # Since the open write began (:meth:`begin`): each row it changed and its entry before.
        self._undo: list[tuple[tuple[str, str], tuple[str, str] | None]] = []

    def begin(self) -> None:
        """A write begins (what it changes is noted, so that :meth:`roll_back` undoes it), or
        one ended: the notes, which hold the texts it replaced or dropped, are let go."""
        self._undo = []

    def roll_back(self) -> None:
        """Undo the changes of the write begun last (it failed): the rows it touched only, not
        a rebuild of the whole index (a refused write rebuilt it: ~0.3 s on the event loop at
        5,000 records)."""
        undo, self._undo = self._undo, []
        for (kind, row_id), entry in reversed(undo):
            self.drop(kind, row_id)
            if entry is not None:
                self.put(kind, row_id, *entry)
        self._undo = []

    def put(self, kind: str, row_id: str, scope: str, text: str) -> None:
        key = (kind, row_id)
        old = self.texts.get(key)
        self._undo.append((key, old))
        if old is not None and old[1] == text:
            self.texts[key] = (scope, text)
            return
        self.drop(kind, row_id)
        self.texts[key] = (scope, text)
        for gram in _grams(text):
            self.rows.setdefault(gram, set()).add(key)

    def drop(self, kind: str, row_id: str) -> None:
        key = (kind, row_id)
        old = self.texts.pop(key, None)
        if old is None:
            return
        self._undo.append((key, old))
        for gram in _grams(old[1]):
            keys = self.rows.get(gram)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.rows[gram]

    def find(self, scope_keys: Sequence[str], probes: Sequence[str]) -> set[tuple[str, str]]:
        """(kind, id) of the rows stored at ``scope_keys`` whose text holds one of ``probes``."""
        scopes = set(scope_keys)
        found: set[tuple[str, str]] = set()
        for probe in probes:
            grams = [probe] if len(probe) <= 3 else [probe[i : i + 3] for i in range(len(probe) - 2)]
            rarest = min((self.rows.get(gram, set()) for gram in grams), key=len)
            for key in rarest:
                if key in found:
                    continue
                scope, text = self.texts[key]
                if scope in scopes and probe in text:
                    found.add(key)
        return found


class MemoryKnowledgeTables:
    """:class:`KnowledgeTables` over plain dicts."""

    _TABLES = ("nodes", "records", "events", "tombstones", "outbox", "vectors", "forgotten_values")

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.records: dict[str, Record] = {}
        self.events: dict[str, ActivityEvent] = {}
        self.tombstones: dict[str, Tombstone] = {}
        self.outbox: dict[str, OutboxEntry] = {}
        self.vectors: dict[str, StoredVector] = {}
        self.vectors_by_scope: dict[str, set[str]] = {}
        """Document ids of :attr:`vectors` per scope, so a search reads its scope chain's
        vectors, not every vector of the store (rebuilt when a failed write is undone)."""
        self.forgotten_values: dict[str, ForgottenValue] = {}
        self.search_index = _SearchIndex()
        """The lexical index of the nodes and records (a rolled-back write's changes undone)."""

    def snapshot(self) -> dict[str, dict[str, Any]]:
        self.search_index.begin()
        return {name: dict(getattr(self, name)) for name in self._TABLES}

    def restore(self, snapshot: dict[str, dict[str, Any]]) -> None:
        for name, rows in snapshot.items():
            setattr(self, name, rows)
        self.vectors_by_scope = {}
        for vector in self.vectors.values():
            self.vectors_by_scope.setdefault(vector.scope, set()).add(vector.document_id)
        self.search_index.roll_back()  # the failed write's changes to it undone

    # nodes
    def node(self, node_id: str) -> Node | None:
        found = self.nodes.get(node_id)
        return _clone(found) if found else None

    def node_by_name(self, scope_key: str, key: str) -> Node | None:
        for node in self.nodes.values():
            if node.scope == scope_key and name_key(node.name) == key:
                return _clone(node)
        return None

    def save_node(self, node: Node) -> None:
        self.nodes[node.id] = _clone(node)
        self.search_index.put("node", node.id, node.scope, node_search_text(node))

    def nodes_in(self, scope_keys: Sequence[str]) -> list[Node]:
        return sorted((_clone(n) for n in self.nodes.values() if n.scope in scope_keys), key=lambda n: n.id)

    def nodes_page(
        self, scope_keys: Sequence[str], *, after: tuple[str, str] | None, prefix: str | None, limit: int
    ) -> list[Node]:
        found = heapq.nsmallest(
            limit,
            (
                n for n in self.nodes.values()
                if n.scope in scope_keys
                and (after is None or node_order(n) > after)
                and (prefix is None or name_key(n.name).startswith(prefix))
            ),
            key=node_order,
        )
        return [_clone(n) for n in found]  # a scan, as everything here; only the page is copied

    def nodes_mentioning(self, node_id: str) -> list[Node]:
        return [_clone(n) for n in self.nodes.values() if node_id in n.mentions]

    def search_candidates(
        self, scope_keys: Sequence[str], probes: Sequence[str]
    ) -> tuple[list[Node], list[Record]]:
        found = sorted(self.search_index.find(scope_keys, probes), key=lambda key: key[1])
        nodes = [_clone(self.nodes[i]) for kind, i in found if kind == "node"]
        records = [_clone(self.records[i]) for kind, i in found if kind == "record"]
        return nodes, records

    # records
    def record(self, record_id: str) -> Record | None:
        found = self.records.get(record_id)
        return _clone(found) if found else None

    def save_record(self, record: Record) -> None:
        self.records[record.id] = _clone(record.model_copy(update={"valid_until": None}))
        self.search_index.put("record", record.id, record.scope, record_search_text(record))

    def records_in(self, scope_keys: Sequence[str]) -> list[Record]:
        return sorted((_clone(r) for r in self.records.values() if r.scope in scope_keys), key=lambda r: r.id)

    def records_about(self, node_id: str) -> list[Record]:
        return sorted((_clone(r) for r in self.records.values() if r.node_id == node_id), key=lambda r: r.id)

    def records_mentioning(self, node_id: str) -> list[Record]:
        return [_clone(r) for r in self.records.values() if node_id in r.mentions]

    def records_about_page(self, node_id: str, before: str | None, limit: int) -> list[Record]:
        return _page(self.records.values(), lambda r: r.node_id == node_id, before, limit, newest_first=True)

    def records_mentioning_page(self, node_id: str, before: str | None, limit: int) -> list[Record]:
        return _page(self.records.values(), lambda r: node_id in r.mentions, before, limit, newest_first=True)

    def records_superseded_by(
        self, record_id: str, node_id: str, after: str | None, limit: int
    ) -> list[Record]:
        return _page(self.records.values(), lambda r: r.superseded_by == record_id and r.node_id == node_id,
                     after, limit, newest_first=False)

    def attribute_records(self, node_id: str, attribute: str) -> list[Record]:
        return [_clone(r) for r in self.records.values() if r.node_id == node_id and r.attribute == attribute]

    def attributes_records(self, node_id: str, attributes: Sequence[str]) -> list[Record]:
        wanted = set(attributes)
        return [_clone(r) for r in self.records.values() if r.node_id == node_id and r.attribute in wanted]

    def records_page(
        self, scope_keys: Sequence[str], *, after: str | None, newest_first: bool, limit: int,
        trust: str | None = None, source_thread_id: str | None = None, below: str | None = None,
    ) -> list[Record]:
        def wanted(r: Record) -> bool:
            return (
                _at(r.scope, scope_keys, below)
                and (trust is None or r.trust == trust)
                and (source_thread_id is None or r.source_thread_id == source_thread_id)
            )

        return _page(self.records.values(), wanted, after, limit, newest_first=newest_first)

    # audit log and tombstones
    def add_event(self, event: ActivityEvent) -> None:
        self.events[event.id] = _clone(event)

    def events_in(self, scope_keys: Sequence[str]) -> list[ActivityEvent]:
        return [_clone(e) for e in self.events.values() if e.scope in scope_keys]

    def events_page(
        self, scope_keys: Sequence[str], before: str | None, limit: int, below: str | None = None
    ) -> list[ActivityEvent]:
        return _page(self.events.values(), lambda e: _at(e.scope, scope_keys, below), before, limit, newest_first=True)

    def save_tombstone(self, tombstone: Tombstone) -> None:
        self.tombstones[tombstone.id] = _clone(tombstone)

    def tombstones_for(self, node_id: str) -> list[Tombstone]:
        return [_clone(t) for t in self.tombstones.values() if t.node_id == node_id]

    def tombstones_in(self, scope_keys: Sequence[str]) -> list[Tombstone]:
        return [_clone(t) for t in self.tombstones.values() if t.scope in scope_keys]

    # outbox and vectors
    def outbox_key_exists(self, idempotency_key: str) -> bool:
        return any(e.idempotency_key == idempotency_key for e in self.outbox.values())

    def save_outbox(self, entry: OutboxEntry) -> None:
        self.outbox[entry.id] = _clone(entry)

    def open_outbox(self, after: str | None = None, limit: int | None = None) -> list[OutboxEntry]:
        return _page(self.outbox.values(), lambda e: e.status != "completed", after, limit, newest_first=False)

    def outbox_entries(self, entry_ids: Collection[str]) -> list[OutboxEntry]:
        return [_clone(self.outbox[i]) for i in dict.fromkeys(entry_ids) if i in self.outbox]

    def all_outbox(self) -> list[OutboxEntry]:
        return [_clone(e) for e in self.outbox.values()]

    def put_vector(self, vector: StoredVector) -> None:
        self._unindex_vector(vector.document_id)
        self.vectors[vector.document_id] = _clone_vector(vector)
        self.vectors_by_scope.setdefault(vector.scope, set()).add(vector.document_id)

    def _unindex_vector(self, document_id: str) -> None:
        stored = self.vectors.get(document_id)
        if stored is None:
            return
        ids = self.vectors_by_scope.get(stored.scope, set())
        ids.discard(document_id)
        if not ids:
            self.vectors_by_scope.pop(stored.scope, None)

    def delete_vector(self, document_id: str, scope: str | None) -> bool:
        stored = self.vectors.get(document_id)
        if stored is None or (scope is not None and stored.scope != scope):
            return False
        self._unindex_vector(document_id)
        del self.vectors[document_id]
        return True

    def vectors_in(self, scope_keys: Sequence[str] | None) -> list[StoredVector]:
        if scope_keys is None:
            ids: Iterable[str] = list(self.vectors)
        else:
            ids = {i for key in dict.fromkeys(scope_keys) for i in self.vectors_by_scope.get(key, ())}
        return [_clone_vector(self.vectors[i]) for i in sorted(ids)]

    def vector_labels(self, after: str | None, limit: int, subtree: str | None) -> list[VectorLabel]:
        wanted = (
            v for v in self.vectors.values()
            if (after is None or v.document_id > after) and (subtree is None or under(v.scope, subtree))
        )  # fmt: skip
        return [
            VectorLabel(v.document_id, v.record_id, v.scope, v.embedder, int(v.vector.shape[0]))
            for v in heapq.nsmallest(limit, wanted, key=lambda v: v.document_id)
        ]

    def record_labels(self, after: str | None, limit: int, subtree: str | None) -> list[RecordLabel]:
        wanted = (
            r for r in self.records.values()
            if (after is None or r.id > after) and (subtree is None or under(r.scope, subtree))
        )  # fmt: skip
        return [
            RecordLabel(
                r.id, r.scope, r.deleted_at is None and r.trust is not TrustState.REJECTED,
                record_document_id(r.id) in self.vectors,
            )
            for r in heapq.nsmallest(limit, wanted, key=lambda r: r.id)
        ]

    # forgotten values
    def save_forgotten(self, forgotten: ForgottenValue) -> None:
        self.forgotten_values[forgotten.id] = _clone(forgotten)

    def forgotten(self, forgotten_id: str) -> ForgottenValue | None:
        found = self.forgotten_values.get(forgotten_id)
        return _clone(found) if found else None

    def forgotten_in(self, scope_keys: Sequence[str]) -> list[ForgottenValue]:
        return [_clone(f) for f in self.forgotten_values.values() if f.scope in scope_keys]

    # lifecycle
    def event(self, event_id: str) -> ActivityEvent | None:
        found = self.events.get(event_id)
        return _clone(found) if found else None

    def tombstone(self, tombstone_id: str) -> Tombstone | None:
        found = self.tombstones.get(tombstone_id)
        return _clone(found) if found else None

    def nodes_under(self, scope_key: str) -> list[Node]:
        return [_clone(n) for n in self.nodes.values() if under(n.scope, scope_key)]

    def records_under(self, scope_key: str) -> list[Record]:
        return [_clone(r) for r in self.records.values() if under(r.scope, scope_key)]

    def events_under(self, scope_key: str) -> list[ActivityEvent]:
        return [_clone(e) for e in self.events.values() if under(e.scope, scope_key)]

    def tombstones_under(self, scope_key: str) -> list[Tombstone]:
        return [_clone(t) for t in self.tombstones.values() if under(t.scope, scope_key)]

    def forgotten_under(self, scope_key: str) -> list[ForgottenValue]:
        return [_clone(f) for f in self.forgotten_values.values() if under(f.scope, scope_key)]

    def delete_node(self, node_id: str) -> None:
        self.nodes.pop(node_id, None)
        self.search_index.drop("node", node_id)

    def delete_record(self, record_id: str) -> None:
        self.records.pop(record_id, None)
        self.search_index.drop("record", record_id)

    def delete_event(self, event_id: str) -> None:
        self.events.pop(event_id, None)

    def delete_tombstone(self, tombstone_id: str) -> None:
        self.tombstones.pop(tombstone_id, None)

    def delete_forgotten(self, forgotten_id: str) -> None:
        self.forgotten_values.pop(forgotten_id, None)

    def delete_outbox_for(self, record_ids: Collection[str]) -> int:
        gone = [key for key, entry in self.outbox.items() if entry.record_id in record_ids]
        for key in gone:
            del self.outbox[key]
        return len(gone)

    def delete_vectors_under(self, scope_key: str) -> int:
        gone = [key for key, vector in self.vectors.items() if under(vector.scope, scope_key)]
        for key in gone:
            self._unindex_vector(key)
            del self.vectors[key]
        return len(gone)

    def scope_keys(self, resource: str | None) -> set[str]:
        rows: list[Iterable[Any]] = [self.nodes.values(), self.records.values(), self.events.values(),
                                     self.tombstones.values(), self.forgotten_values.values(), self.vectors.values()]
        return {row.scope for table in rows for row in table}


class InMemoryKnowledgeStore(TablesKnowledgeStore):
    """A :class:`~obsmem.knowledge.store.contract.KnowledgeStore` that lives in this process.

    ::

        async with InMemoryKnowledgeStore() as store:
            node = await store.create_node("Jane", "person", "org:acme", actor="me", reason="demo")
    """

    url = "memory://knowledge"

    def __init__(self, *, clock: Clock | None = None, ids: UlidGenerator | None = None) -> None:
        super().__init__(clock=clock, ids=ids)
        self.tables = MemoryKnowledgeTables()
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Nothing to migrate: the in-memory store has no schema."""
        if self._closed:
            raise StoreClosedError()
        return []

    async def _transact(self, write: bool, fn: Callable[[KnowledgeTables], T]) -> T:
        if self._closed:
            raise StoreClosedError()
        if not write:
            return fn(self.tables)
        snapshot = self.tables.snapshot()
        try:
            result = fn(self.tables)
        except BaseException:
            self.tables.restore(snapshot)
            raise
        self.tables.search_index.begin()  # its undo notes dropped: no erased text stays in them
        return result
