"""The row-level interface both knowledge adapters implement, so the rules are written once.

The knowledge store's rules (ceilings, tombstones, one event per mutation, outbox keys,
bitemporal reads) are identical for every adapter, so they live in
:mod:`~obsmem.knowledge.store.ops` and :mod:`~obsmem.knowledge.store.reads`, written
against this small synchronous protocol. An adapter only stores and fetches rows, and wraps
each operation in a transaction: a snapshot for the in-memory adapter, ``BEGIN IMMEDIATE``
for SQLite, an advisory lock for PostgreSQL. The two SQL adapters share one implementation,
:class:`~obsmem.knowledge.store.sql_tables.SqlKnowledgeTables`, over a dialect. Every method
returns fresh objects; lists carry no particular order unless stated.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import NamedTuple, Protocol

from obsmem.knowledge.store.contract import (
    ActivityEvent,
    ForgottenValue,
    Node,
    OutboxEntry,
    Record,
    StoredVector,
    Tombstone,
    record_document_id,
)

__all__ = [
    "FORGOTTEN_NODE_ID", "KNOWLEDGE_MIGRATIONS_TABLE", "KnowledgeTables", "RecordLabel", "VectorLabel", "name_key",
    "node_order", "node_search_text", "record_search_text", "search_probe", "under",
]

# The knowledge schema's version table, apart from the message store's: the two evolve separately.
KNOWLEDGE_MIGRATIONS_TABLE = "_obsmem_knowledge_migrations"

FORGOTTEN_NODE_ID = ""
"""The SQL adapters keep forgotten values in the tombstones table under this node id (no node
has an empty id; a forgotten value applies to every node), so forgetting needed no schema
change. Their ``doc`` is a :class:`ForgottenValue`; every tombstone read skips these rows."""


def name_key(name: str) -> str:
    """A node's identity within its scope: trimmed, case-insensitive name."""
    return name.strip().casefold()


def node_order(node: Node) -> tuple[str, str]:
    """The order nodes are listed in: case-insensitive name (its :func:`name_key`), then id."""
    return (name_key(node.name), node.id)


def node_search_text(node: Node) -> str:
    """What a lexical search looks for a term in, in a node: its name, kind, description and
    content, casefolded (a term matches where it is a substring of this)."""
    return " ".join(filter(None, [node.name, node.kind, node.description, node.content])).casefold()


def record_search_text(record: Record) -> str:
    """What a lexical search looks for a term in, in a record: its text, casefolded."""
    return record.text.casefold()


_NOT_PROBED = re.compile("[\x00\ud800-\udfff]")


def search_probe(term: str) -> str:
    """The part of a (casefolded) search term an index is asked for: its longest run without a
    NUL character (no SQL index holds or is asked for one) or a lone surrogate (half an emoji a
    client split: no UTF-8 driver can send it, and SQLite's and psycopg's raised
    UnicodeEncodeError on it). A row whose search text contains ``term`` contains this; an empty
    probe (a term of such characters only) narrows nothing."""
    return max(_NOT_PROBED.split(term), key=len)


def under(scope: str, key: str) -> bool:
    """Whether a row stored at ``scope`` lies in the subtree of ``key`` (``key`` or below it)."""
    return scope == key or scope.startswith(key + "/")


class VectorLabel(NamedTuple):
    """What a stored vector is, without the vector: enough to tell which embedder made it (its
    name, and its length: an embedder may keep its name with another dimension)."""

    document_id: str
    record_id: str
    scope: str
    embedder: str
    dimensions: int


class RecordLabel(NamedTuple):
    """What a record is to the index, without its text: whether it should have a vector (it is
    not removed nor rejected) and whether it has one (any embedder's)."""

    record_id: str
    scope: str
    live: bool
    indexed: bool

    @property
    def document_id(self) -> str:
        """The document id its vector is stored under."""
        return record_document_id(self.record_id)


class KnowledgeTables(Protocol):
    # nodes
    def node(self, node_id: str) -> Node | None: ...
    def node_by_name(self, scope_key: str, name_key: str) -> Node | None: ...
    def save_node(self, node: Node) -> None: ...
    def nodes_in(self, scope_keys: Sequence[str]) -> list[Node]: ...
    def nodes_page(
        self, scope_keys: Sequence[str], *, after: tuple[str, str] | None, prefix: str | None, limit: int
    ) -> list[Node]:
        """At most ``limit`` nodes stored at ``scope_keys`` (merged ones too) in
        :func:`node_order` beyond ``after``; with ``prefix``: only those whose name key starts
        with it. A page reads about what it returns (the SQL adapters walk the
        ``(scope, name_key)`` index of each scope key from the cursor on)."""
        ...
    def nodes_mentioning(self, node_id: str) -> list[Node]: ...
    def search_candidates(
        self, scope_keys: Sequence[str], probes: Sequence[str]
    ) -> tuple[list[Node], list[Record]]:
        """The nodes and records stored at ``scope_keys`` whose search text
        (:func:`node_search_text`, :func:`record_search_text`) contains one of ``probes``
        (non-empty :func:`search_probe` results), each in id order; possibly more (the caller
        checks every term), never fewer. Found by an index kept with the rows, so a search
        decodes the rows that can match, not every row the scopes hold."""
        ...

    # records
    def record(self, record_id: str) -> Record | None: ...
    def save_record(self, record: Record) -> None: ...
    def records_in(self, scope_keys: Sequence[str]) -> list[Record]: ...
    def records_about(self, node_id: str) -> list[Record]: ...
    def records_mentioning(self, node_id: str) -> list[Record]: ...
    def records_about_page(self, node_id: str, before: str | None, limit: int) -> list[Record]:
        """At most ``limit`` records about the node, newest (highest id) first, older than ``before``."""
        ...
    def records_mentioning_page(self, node_id: str, before: str | None, limit: int) -> list[Record]:
        """:meth:`records_about_page` for the records mentioning the node."""
        ...
    def records_superseded_by(
        self, record_id: str, node_id: str, after: str | None, limit: int
    ) -> list[Record]:
        """At most ``limit`` records about the node whose ``superseded_by`` is ``record_id``, oldest
        (lowest id) first, newer than ``after``: it reads what it returns, not the node's other
        records (a supersession names a record about the same node)."""
        ...
    def attribute_records(self, node_id: str, attribute: str) -> list[Record]:
        """The records about the node with that ``attribute`` (a timeline), in no order."""
        ...
    def attributes_records(self, node_id: str, attributes: Sequence[str]) -> list[Record]:
        """The records about the node with any of ``attributes`` (their timelines), in no order:
        one read for a page's records, where :meth:`attribute_records` a record read the node's
        records again each time."""
        ...
    def records_page(
        self, scope_keys: Sequence[str], *, after: str | None, newest_first: bool, limit: int,
        trust: str | None = None, source_thread_id: str | None = None, below: str | None = None,
    ) -> list[Record]:
        """At most ``limit`` records stored at ``scope_keys`` (with ``below``: or strictly below
        that scope key; with that trust, from that thread), in id order (``newest_first``:
        descending) beyond ``after``: a page reads what it shows."""
        ...

    # audit log and tombstones
    def add_event(self, event: ActivityEvent) -> None: ...
    def events_in(self, scope_keys: Sequence[str]) -> list[ActivityEvent]: ...
    def events_page(
        self, scope_keys: Sequence[str], before: str | None, limit: int, below: str | None = None
    ) -> list[ActivityEvent]:
        """At most ``limit`` events stored at ``scope_keys`` (with ``below``: or strictly below that
        scope key), newest first, older than ``before``."""
        ...
    def save_tombstone(self, tombstone: Tombstone) -> None: ...
    def tombstones_for(self, node_id: str) -> list[Tombstone]: ...
    def tombstones_in(self, scope_keys: Sequence[str]) -> list[Tombstone]: ...

    # semantic outbox and vectors. ``open_outbox`` is ordered by id: the entries not completed,
    # after id ``after`` (all without it), at most ``limit`` (all without it); a claim reads it a
    # page at a time, so it never reads the completed history nor more open entries than it needs.
    def outbox_key_exists(self, idempotency_key: str) -> bool: ...
    def save_outbox(self, entry: OutboxEntry) -> None: ...
    def open_outbox(self, after: str | None = None, limit: int | None = None) -> list[OutboxEntry]: ...
    def outbox_entries(self, entry_ids: Collection[str]) -> list[OutboxEntry]: ...
    def all_outbox(self) -> list[OutboxEntry]: ...
    def put_vector(self, vector: StoredVector) -> None: ...
    def delete_vector(self, document_id: str, scope: str | None) -> bool: ...
    def vectors_in(self, scope_keys: Sequence[str] | None) -> list[StoredVector]: ...
    def vector_labels(self, after: str | None, limit: int, subtree: str | None) -> list[VectorLabel]:
        """At most ``limit`` stored vectors' labels in document id order, beyond ``after``; with
        ``subtree``, only those stored at that scope key or below it (see :func:`under`)."""
        ...
    def record_labels(self, after: str | None, limit: int, subtree: str | None) -> list[RecordLabel]:
        """At most ``limit`` records' labels in id order, beyond ``after``; with ``subtree``,
        only those stored at that scope key or below it. Reads no record's text into Python and
        no vector: a page costs what it returns (the primary keys of both tables)."""
        ...

    # forgotten values (digests only)
    def save_forgotten(self, forgotten: ForgottenValue) -> None: ...
    def forgotten(self, forgotten_id: str) -> ForgottenValue | None: ...
    def forgotten_in(self, scope_keys: Sequence[str]) -> list[ForgottenValue]: ...

    # lifecycle: single-row lookups, subtree listings (see :func:`under`) and hard deletes.
    # Deleting a node or record also deletes its mention rows; nothing else cascades.
    def event(self, event_id: str) -> ActivityEvent | None: ...
    def tombstone(self, tombstone_id: str) -> Tombstone | None: ...
    def nodes_under(self, scope_key: str) -> list[Node]: ...
    def records_under(self, scope_key: str) -> list[Record]: ...
    def events_under(self, scope_key: str) -> list[ActivityEvent]: ...
    def tombstones_under(self, scope_key: str) -> list[Tombstone]: ...
    def forgotten_under(self, scope_key: str) -> list[ForgottenValue]: ...
    def delete_node(self, node_id: str) -> None: ...
    def delete_record(self, record_id: str) -> None: ...
    def delete_event(self, event_id: str) -> None: ...
    def delete_tombstone(self, tombstone_id: str) -> None: ...
    def delete_forgotten(self, forgotten_id: str) -> None: ...
    def delete_outbox_for(self, record_ids: Collection[str]) -> int: ...
    def delete_vectors_under(self, scope_key: str) -> int: ...
    def scope_keys(self, resource: str | None) -> set[str]:
        """Every scope key a node, record, tombstone, forgotten value, audit event or vector is
        stored at; with ``resource``, at least those of that resource (``org:*/resource:<id>``
        and its threads), and possibly more: the caller filters exactly."""
        ...
