"""The knowledge store contract: a scoped graph of nodes and immutable records about them.

This is the storage half of obsmem's "subconscious" memory. The engine half
(:mod:`obsmem.knowledge`) parses wikilinks, resolves names, embeds text and fuses search
results; the store keeps the data and guarantees the invariants that must hold whatever the
caller does:

* **Scopes and ceilings.** Every node and record lives in one scope (see
  :mod:`~obsmem.knowledge.store.scopes`); reads see only their scope chain, so sibling
  threads never see each other. Writes are scoped like reads: every write acts from a scope
  (a node's or record's own scope on creation, the ``scope`` argument otherwise) and may only
  touch nodes and records that scope sees; a record's node and every wikilink target must be
  visible from the text's own scope, and a node a link creates must lie within the record's
  ceiling. A record's ``max_scope`` ceiling is checked on append and on every rescope;
  :meth:`KnowledgeStore.raise_ceiling` can only broaden it, and only when called with
  ``privileged=True``.
* **Refusals are audited.** A write refused for visibility, ceiling, privilege or a tombstone
  rolls back and then logs one ``write-refused`` event at the acting scope.
* **One activity event per mutation**, from :class:`ActivityAction`, with actor and reason,
  written in the same transaction as the change.
* **Atomic mutations.** A failure anywhere (an unresolvable mention, a tombstoned value, a
  ceiling) leaves no node, record, mention, event or outbox row behind.
* **Tombstones** on (node, scope, value) refuse re-capture of a deleted value, matched on
  :func:`~obsmem.knowledge.store.values.value_key` or as a near-duplicate
  (:func:`~obsmem.knowledge.store.values.near_duplicate`), and hide exact-key matches from
  default reads.
* **Trust**: records are ``candidate``, ``verified`` or ``rejected``; reads return verified
  records, candidates only when asked, rejected never.
* **Two time axes.** ``captured_at`` is stamped by the store; ``when`` is the fact time. Every
  record read takes ``as_of`` (fact time) and ``as_known_at`` (capture time). Records about the
  same node, attribute and scope form a timeline: each one's validity ends where the next
  begins (``valid_until``), computed at read time, so nothing is deleted to close it.
* **Forgetting and purging** are hard deletes. :meth:`KnowledgeStore.forget_value` removes
  every node, record, tombstone and audit event holding a value (matched inside the text, see
  :func:`~obsmem.knowledge.store.values.forget_key`) on a scope's chain and subtree, with their
  outbox entries and vectors, and keeps a :class:`ForgottenValue` (a digest, never the text) that
  refuses the value's return; :meth:`KnowledgeStore.purge_scope` removes everything stored under
  a scope. Each leaves one audit event that names no text.
* **Semantic outbox**: every change that affects a record's vector enqueues an idempotent
  outbox entry; workers claim, complete or release entries with a lease; the vectors
  themselves live in the store under the record's current scope.

A stale compare-and-set (``expected_version``) returns ``None``, as elsewhere in obsmem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import TracebackType
from typing import Any, Generic, Literal, Protocol, Self, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from obsmem.knowledge.store.scopes import Level
from obsmem.knowledge.store.values import When, check_instant

__all__ = [
    "DEFAULT_VIEW",
    "DESCRIPTION_LIMIT",
    "FORGOTTEN_PLACEHOLDER",
    "ActivityAction",
    "ActivityEvent",
    "ForgottenValue",
    "KnowledgeDump",
    "KnowledgeStore",
    "LexicalHit",
    "MentionTarget",
    "NewNodeMention",
    "Node",
    "OutboxEntry",
    "Page",
    "Record",
    "RecordDraft",
    "RecordView",
    "StoredVector",
    "Tombstone",
    "TrustState",
    "record_document_id",
]

DESCRIPTION_LIMIT = 400

FORGOTTEN_PLACEHOLDER = "[forgotten value]"
"""What a refusal of a forgotten value shows instead of the value."""

T = TypeVar("T")


class TrustState(StrEnum):
    """How far a record is believed: reads return verified records, candidates only when asked."""

    CANDIDATE = "candidate"
    VERIFIED = "verified"
    REJECTED = "rejected"


class ActivityAction(StrEnum):
    """The closed vocabulary of the audit log: one event per mutation, nothing else (but a
    removal for a narrower scope's record, see :meth:`KnowledgeStore.remove_record`'s
    ``reason_within``: one event at each of the two scopes)."""

    NODE_CREATED = "node-created"
    NODE_UPDATED = "node-updated"
    NODE_MERGED = "node-merged"
    RECORD_CREATED = "record-created"
    RECORD_DELETED = "record-deleted"
    RECORD_RESTORED = "record-restored"
    RECORD_RESCOPED = "record-rescoped"
    RECORD_VERIFIED = "record-verified"
    RECORD_REJECTED = "record-rejected"
    TOMBSTONE_CREATED = "tombstone-created"
    VALUE_FORGOTTEN = "value-forgotten"
    """A value was forgotten: its occurrences hard-deleted and a :class:`ForgottenValue` kept.
    ``details`` holds the counts per kind and the digest, never the value."""
    SCOPE_PURGED = "scope-purged"
    """Everything under a scope was hard-deleted; logged at the parent scope, ``details`` names
    the level and the counts (the scope only by digest, as the subject). An org's purge logs
    none: nothing is above it, and at its own key the event would keep the org's id."""
    WRITE_REFUSED = "write-refused"
    """A write refused for scope, ceiling, privilege or tombstone reasons; written on its own,
    after the refused write rolled back, at the scope the write acted from. ``details`` names the
    ``operation``, the ``refusal`` (``not-visible``, ``scope``, ``ceiling``, ``privilege`` or
    ``tombstoned``) and the error message."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Node(_Frozen):
    """A thing knowledge is about: a person, project, task... identified by (scope, name)."""

    id: str
    name: str
    kind: str
    content: str | None = None
    description: str | None = None
    scope: str
    version: int = 1
    merged_into: str | None = None
    mentions: tuple[str, ...] = ()
    metadata: dict[str, Any] = {}
    created_at: datetime
    updated_at: datetime


class Record(_Frozen):
    """One immutable fact about a node. Only store-managed fields ever change.

    ``valid_until`` is not stored: reads fill it in from the next record about the same node,
    attribute and scope that is known at the read's ``as_known_at``.
    """

    id: str
    node_id: str
    text: str
    scope: str
    source_thread_id: str | None = None
    captured_at: datetime
    when: When | None = None
    max_scope: Level = Level.ORG
    attribute: str | None = None
    trust: TrustState = TrustState.VERIFIED
    metadata: dict[str, Any] = {}
    mentions: tuple[str, ...] = ()
    revision: int = 1
    deleted_at: datetime | None = None
    deleted_by: str | None = None
    superseded_by: str | None = None
    """Set when the removal was a supersession (``remove_record(..., superseded_by=...)``): a newer
    value replaced this one, which was true until then. Such a record is history, not a retraction:
    reads ``as_of`` a time it covers (before its successor's fact time) still return it. A read
    from a scope that does not see the successor (a sibling of the thread holding it) gets a
    plain removal instead: no successor id, no history dated by it. A hard delete of the
    successor (erase, forget, purge) clears the link."""
    trust_changed_at: datetime | None = None
    removed_before: tuple[tuple[datetime, datetime], ...] = ()
    """Earlier removals that were undone (``restore_record``), each (removed at, restored at),
    oldest first: a read ``as_known_at`` a moment inside one leaves the record out, as the
    store held it then."""
    valid_until: datetime | None = None

    @property
    def valid_from(self) -> datetime:
        """When the fact starts to hold: its ``when`` start, else the moment it was captured."""
        return self.when.start if self.when is not None else self.captured_at


class ActivityEvent(_Frozen):
    """One entry of the audit log: which mutation, on what, by whom and why."""

    id: str
    action: ActivityAction
    subject_type: Literal["node", "record", "tombstone", "scope"]
    subject_id: str
    scope: str
    actor: str
    reason: str
    source_thread_id: str | None = None
    created_at: datetime
    details: dict[str, Any] = {}


class Tombstone(_Frozen):
    """A deleted value that may not be captured again in ``scope`` or below (``value`` is normalised)."""

    id: str
    node_id: str
    scope: str
    value: str  # normalised
    actor: str
    reason: str
    created_at: datetime


class ForgottenValue(_Frozen):
    """A forgotten value, refused in ``scope`` and below for every node, kept without its text.

    ``digest`` is :func:`~obsmem.knowledge.store.values.forgotten_digest` of the value's
    :func:`~obsmem.knowledge.store.values.forget_key`, ``length`` that key's length: what the
    knowledge store refuses (case-folded, letters and digits only: deliberately broad).
    ``exact_digests`` holds, for each value forgotten under this key, its
    :func:`~obsmem.knowledge.store.values.exact_digest` and length in characters: the value as a
    forget of messages and observations matched it (its
    :func:`~obsmem.knowledge.store.values.exact_form`; "Ann" and then "ann" give two). An import
    matches messages, observations and working memory with these, so it leaves out what the
    forgets did and no more ("Ann" is not in "planning"). None on a row an older obsmem wrote, and
    once a phone number was forgotten under the key: such a row is matched by ``digest``. A value
    without a letter or digit (an emoji, a code of symbols) has an empty key: its row has
    ``digest`` "" and ``length`` 0 (the knowledge store refuses nothing by it) and is kept for its
    exact digests alone.
    """

    id: str
    scope: str
    digest: str
    length: int
    actor: str
    reason: str
    created_at: datetime
    exact_digests: tuple[tuple[str, int], ...] | None = None


class OutboxEntry(_Frozen):
    id: str
    idempotency_key: str
    document_id: str
    record_id: str
    operation: Literal["upsert", "delete"]
    scope: str
    status: Literal["pending", "processing", "completed"] = "pending"
    attempts: int = 0
    available_at: datetime
    claimed_at: datetime | None = None
    claimed_by: str | None = None
    lease_seconds: float | None = None
    """The lease its holder claimed it for (``claim_outbox``'s ``lease_seconds``): the claim
    expires by it, whichever worker looks next. None when not held (and on an entry an older
    version claimed: that one expires by the longer of the lease of the worker looking and
    ``Knowledge.drain``'s 60 s)."""
    created_at: datetime
    completed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class StoredVector:
    """A record's embedding under the scope it was indexed at."""

    document_id: str
    record_id: str
    scope: str
    embedder: str
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class KnowledgeDump:
    """Everything a scope's export holds, each list by id: the rows on its chain (its
    ancestors') and in its subtree (its threads'), exactly as stored."""

    nodes: list[Node] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    tombstones: list[Tombstone] = field(default_factory=list)
    forgotten: list[ForgottenValue] = field(default_factory=list)
    events: list[ActivityEvent] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "records": len(self.records),
            "tombstones": len(self.tombstones),
            "forgotten": len(self.forgotten),
            "events": len(self.events),
        }


@dataclass(frozen=True, slots=True)
class NewNodeMention:
    """A wikilink that resolved to nothing: the write creates (or reuses) this node."""

    name: str
    scope: str
    kind: str = "node"


MentionTarget = str | NewNodeMention
"""An existing node id, or a node to create inside the same transaction."""


@dataclass(frozen=True, slots=True)
class RecordDraft:
    """A record to append: what the caller decides; the store stamps the rest.

    The store assigns ``captured_at``, the revision and (unless ``record_id``, a ULID, is given) the id,
    normalises ``attribute``, adds the mutation's ``reason`` to ``metadata`` and turns
    ``mentions`` (node ids, or :class:`NewNodeMention` to create in the same transaction) into
    node ids. ``max_scope`` is the ceiling: ``scope`` must lie within it.
    """

    node_id: str
    text: str
    scope: str
    source_thread_id: str | None = None
    when: When | None = None
    max_scope: Level = Level.ORG
    attribute: str | None = None
    trust: TrustState = TrustState.VERIFIED
    metadata: Mapping[str, Any] | None = None
    mentions: Sequence[MentionTarget] = ()
    record_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecordView:
    """Which records a read returns, and as of which times.

    ``as_of``: only records whose validity covers that fact time. ``as_known_at``: the store as
    it was at that capture time (later captures, deletions, trust changes and supersessions are
    ignored). Without ``as_of``, only records no known record supersedes are returned, unless
    ``include_superseded`` (the review queue and history views use it).

    Both times are datetimes; a naive one is taken as UTC, as a naive fact time is. Anything
    else is refused with :class:`~obsmem.errors.InvalidInputError` naming the argument.
    """

    as_of: datetime | None = None
    as_known_at: datetime | None = None
    include_candidates: bool = False
    include_deleted: bool = False
    include_superseded: bool = False

    def __post_init__(self) -> None:
        for argument in ("as_of", "as_known_at"):
            value = getattr(self, argument)
            if value is not None:
                object.__setattr__(self, argument, check_instant(value, argument))


DEFAULT_VIEW = RecordView()
"""Verified, live, current records: what a read returns unless asked otherwise."""


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; pass ``next_cursor`` as ``after`` for the next (``None``: the last page)."""

    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class LexicalHit:
    """A lexical search result; ``score`` counts the query terms it contains."""

    kind: Literal["node", "record"]
    id: str
    node_id: str
    text: str
    scope: str
    score: float
    record: Record | None = field(default=None, compare=False)


def record_document_id(record_id: str) -> str:
    return f"knowledge:record:{record_id}"


@runtime_checkable
class KnowledgeStore(Protocol):
    """The knowledge store. Implemented by the in-memory and SQLite adapters."""

    url: str

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Bring the knowledge tables up to date; the steps applied now (``dry_run``: still pending).

        A store migrates by itself on first use; this is for ``obsmem migrate`` and deploys.
        """
        ...

    # -- nodes ---------------------------------------------------------------------------------
    async def create_node(
        self,
        name: str,
        kind: str,
        scope: str,
        *,
        actor: str,
        reason: str,
        content: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        mentions: Sequence[MentionTarget] = (),
        node_id: str | None = None,
    ) -> Node: ...

    async def get_node(self, node_id: str, scope: str) -> Node | None: ...

    async def resolve_node(self, name: str, scope: str) -> Node | None: ...

    async def update_node(
        self,
        node_id: str,
        expected_version: int,
        *,
        scope: str,
        actor: str,
        reason: str,
        name: str | None = None,
        kind: str | None = None,
        content: str | None = None,
        description: str | None = None,
        mentions: Sequence[MentionTarget] | None = None,
    ) -> Node | None:
        """Compare-and-set a node visible from ``scope`` (the scope the write acts from)."""
        ...

    async def merge_nodes(
        self, source_id: str, target_id: str, source_version: int, *, scope: str, actor: str, reason: str
    ) -> Node | None:
        """Fold ``source`` into ``target``, both visible from ``scope``; a description is adopted
        only from a node of the same scope, so a merge never widens who reads it."""
        ...

    async def list_nodes(
        self,
        scope: str,
        *,
        name_prefix: str | None = None,
        kind: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Node]: ...

    # -- records -------------------------------------------------------------------------------
    async def append_record(self, draft: RecordDraft, *, actor: str, reason: str) -> Record: ...

    async def get_record(
        self, record_id: str, scope: str, view: RecordView = DEFAULT_VIEW
    ) -> Record | None: ...

    async def remove_record(
        self, record_id: str, scope: str, *, actor: str, reason: str, tombstone: bool = False,
        superseded_by: str | None = None, reason_within: tuple[str, str] | None = None,
    ) -> Record:
        """Soft-delete a record. ``superseded_by``: the id of the record (about the same node, seen
        from ``scope``) whose newer value replaced it; the removed record stays history for reads
        ``as_of`` the time it held (see :attr:`Record.superseded_by`).

        ``reason_within``: ``(narrower scope, full reason)`` when the removal is for a record of a
        scope below the removed record's (a thread's newer value closing its resource's): the
        ``record-deleted`` event at the record's scope, which every thread of it reads, holds
        ``reason`` (naming none of the narrower scope's text), and a second ``record-deleted``
        event, logged at the narrower scope (below the record's, on ``scope``'s chain), holds the
        full reason; the first one's ``details["reason_event"]`` is its id, shown only to reads
        (audit, export) that reach the narrower scope, and dropped when that event is hard-deleted
        (a purge of the scope, a forget). An erase of the record deletes both."""
        ...

    async def restore_record(self, record_id: str, scope: str, *, actor: str, reason: str) -> Record: ...

    async def rescope_record(
        self, record_id: str, scope: str, new_scope: str, *, actor: str, reason: str
    ) -> Record: ...

    async def raise_ceiling(
        self,
        record_id: str,
        scope: str,
        ceiling: Level,
        *,
        actor: str,
        reason: str,
        privileged: bool = False,
    ) -> Record:
        """Broaden a record's ceiling. A privileged operation: without ``privileged=True`` it is
        refused (and audited), so an agent-facing caller can never lift a ceiling by accident."""
        ...

    async def set_trust(
        self,
        record_id: str,
        scope: str,
        trust: TrustState,
        *,
        actor: str,
        reason: str,
        tombstone: bool = False,
    ) -> Record: ...

    async def add_tombstone(
        self, node_id: str, scope: str, value: str, *, actor: str, reason: str
    ) -> Tombstone: ...

    async def list_tombstones(self, scope: str) -> list[Tombstone]: ...

    # -- record reads --------------------------------------------------------------------------
    # A record listing's ``after`` is the ``next_cursor`` of the page before (a record id);
    # anything else is refused (InvalidInputError naming ``after``).
    async def list_about(
        self,
        node_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]: ...

    async def list_mentioning(
        self,
        node_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]: ...

    async def list_related(
        self,
        node_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]: ...

    async def list_by_source(
        self,
        source_thread_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]: ...

    async def list_superseded_by(
        self,
        record_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]:
        """The records removed as superseded by ``record_id`` (:attr:`Record.superseded_by`),
        visible from ``scope`` in ``view``, oldest first. They are removed, so a view that shows
        them includes deleted records (or reads ``as_of`` a time they held). A page reads those
        records, not the rest of their node (none: an unknown or erased ``record_id``)."""
        ...

    async def list_candidates(
        self, scope: str, *, after: str | None = None, limit: int = 100, within: bool = False,
        threads: bool = False,
    ) -> Page[Record]:
        """Candidates visible from ``scope``, newest first; ``within``: only those stored at
        ``scope`` itself (what a reviewer of that scope decides on), not its ancestors';
        ``threads``: for a resource scope, also those stored at its threads' scopes (what capture
        writes; a resource's reviewer decides on them too). Never a sibling's."""
        ...

    async def search_lexical(
        self, query: str, scope: str, *, view: RecordView = DEFAULT_VIEW, limit: int = 20
    ) -> list[LexicalHit]:
        """Nodes and records visible from ``scope`` holding the query's terms, best first. With
        ``view.as_known_at``, a node changed after that moment (created, renamed, its content or
        description written) is left out: a node keeps no history of what it held then."""
        ...

    async def list_activity(
        self, scope: str, *, after: str | None = None, limit: int = 100, threads: bool = False
    ) -> Page[ActivityEvent]:
        """The audit events stored at ``scope`` and its ancestors, newest first; ``threads``: for
        a resource scope, also those of its threads' scopes. Never a sibling's. ``after`` is the
        ``next_cursor`` of the page before (anything else: InvalidInputError naming ``after``)."""
        ...

    # -- semantic outbox and vectors -------------------------------------------------------------
    async def claim_outbox(
        self, worker_id: str, *, limit: int = 50, lease_seconds: float = 60.0, now: datetime | None = None,
        scope: str | None = None,
    ) -> list[OutboxEntry]:
        """Claim up to ``limit`` entries (see :mod:`~obsmem.knowledge.store.outbox`); with
        ``scope``, only entries stored at that scope or below it (a scoped reindex): another
        scope's entry is left, and its document's later entries wait behind it."""
        ...

    async def complete_outbox(self, worker_id: str, entry_ids: Sequence[str]) -> int: ...

    async def release_outbox(
        self, worker_id: str, entry_ids: Sequence[str], *, retry_at: datetime | None = None
    ) -> int: ...

    async def list_outbox(self, *, include_completed: bool = False) -> list[OutboxEntry]: ...

    async def put_vector(self, vector: StoredVector) -> None: ...

    async def put_claimed_vector(self, worker_id: str, entry_id: str, vector: StoredVector) -> bool:
        """Put ``vector`` only while ``worker_id`` holds the outbox entry ``entry_id`` (claimed,
        not finished, not taken over) and its record is live, in one transaction; whether it was
        put. The index worker writes what it embedded this way."""
        ...

    async def delete_vector(self, document_id: str, scope: str | None = None) -> bool: ...

    async def list_vectors(self, scope_keys: Sequence[str] | None = None) -> list[StoredVector]: ...

    async def queue_reembed(
        self, embedder: str, *, dimensions: int | None = None, after: str | None = None, limit: int = 200,
        scope: str | None = None,
    ) -> tuple[int, str | None]:
        """Read the next ``limit`` stored vectors (document id order, beyond ``after``; with
        ``scope``, those stored at it or below it) and queue an outbox upsert for each that
        ``embedder`` (a name) did not make, or (given ``dimensions``) that has another length:
        an embedder may keep its name with another dimension. The index worker embeds those
        records again. Returns how many were queued, and the ``after`` of the next page (None
        once this page was the last). Reads no record's text and no vector, and each step is
        bounded by ``limit``."""
        ...

    async def queue_unindexed(
        self, *, after: str | None = None, limit: int = 200, scope: str | None = None
    ) -> tuple[int, str | None]:
        """Read the next ``limit`` records (id order, beyond ``after``; with ``scope``, those
        stored at it or below it) and queue an outbox upsert for each live one (not removed, not
        rejected) that has no vector at all: its vector row was lost (a table restored without
        it, the vectors deleted to reset the index). The index worker embeds them. Returns how
        many were queued, and the ``after`` of the next page (None once this page was the last).
        Reads no record's text into memory and no vector, and each step is bounded by ``limit``."""
        ...

    async def load_record(self, record_id: str) -> Record | None:
        """The record by id whatever its scope, state or trust (for the index worker)."""
        ...

    async def load_node(self, node_id: str) -> Node | None:
        """The node by id whatever its scope (for the index worker's document text)."""
        ...

    # -- lifecycle: forgetting, purging, export and restore ----------------------------------------
    async def forget_value(
        self, value: str, scope: str, *, actor: str, reason: str, within: str | None = None
    ) -> dict[str, int]:
        """Hard-delete every occurrence of ``value`` on ``scope``'s chain and in its subtree;
        with ``within`` (a scope containing ``scope``), only on the part of the chain at or below
        ``within``: the rows of broader scopes stay (InvalidInputError if ``scope`` is not in it).

        A node whose name holds it goes with its records; a node whose content, description or
        metadata holds it loses that field; a record, tombstone or audit event holding it
        anywhere goes, with the record's outbox entries and vectors. A :class:`ForgottenValue`
        at ``scope`` then refuses (as tombstoned, audited without the text) any later record or
        node text holding the value in ``scope`` or below. One ``value-forgotten`` event is
        logged. Returns counts per kind (``nodes``, ``nodes_scrubbed``, ``records``,
        ``tombstones``, ``events``, ``outbox``, ``vectors``, ``forgotten``).
        """
        ...

    async def erase_records(
        self, record_ids: Sequence[str], scope: str, *, actor: str, reason: str
    ) -> dict[str, int]:
        """Hard-delete these records (each visible to ``scope``, else refused as a removal is):
        their rows, vectors, outbox entries and the audit events about them. One
        ``record-deleted`` event per record stays, marked ``erased`` and holding no text. Where
        :meth:`remove_record` keeps the record (soft delete, history), this keeps nothing.
        Returns counts per kind."""
        ...

    async def purge_scope(self, scope: str, *, actor: str, reason: str) -> dict[str, int]:
        """Hard-delete everything stored at ``scope`` or below: nodes, records, tombstones,
        forgotten values, audit events, outbox entries and vectors; links to purged nodes are
        dropped from the nodes that remain. One ``scope-purged`` event is logged at the parent
        scope; none for an org (no row may keep its id). Returns counts per kind."""
        ...

    async def list_scopes(self, *, resource: str | None = None) -> list[str]:
        """Every scope key at which a row is stored (a node, record, tombstone, forgotten value,
        audit event or vector), sorted; with ``resource``, only that resource's scopes in every
        org (``org:<any>/resource:<resource>`` and its threads'). What an erasure reaches once the
        resource has no live thread left to name its orgs (:mod:`obsmem.knowledge.lifecycle`)."""
        ...

    async def list_forgotten(self, scope: str) -> list[ForgottenValue]:
        """The forgotten values that apply at ``scope`` (on its chain), by id."""
        ...

    async def dump_scope(self, scope: str) -> KnowledgeDump:
        """Every row on ``scope``'s chain and in its subtree, as stored (for export)."""
        ...

    async def restore_dump(self, dump: KnowledgeDump, *, subtree: str) -> dict[str, int]:
        """Write ``dump`` back exactly (ids, times, revisions, trust, audit log), in one
        transaction, and queue every live record for the semantic index.

        A row under ``subtree`` whose id is taken is refused with
        :class:`~obsmem.errors.ImportConflictError`; a row above it (the org's) that is already
        stored identically is kept, differently is refused. Returns counts per kind written.
        """
        ...
