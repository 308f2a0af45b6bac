"""The async face shared by both knowledge adapters.

:class:`TablesKnowledgeStore` implements every :class:`KnowledgeStore` method once, as "run
this mutation (or read) in one transaction". An adapter supplies only :meth:`_transact`: how
to open a transaction over its :class:`KnowledgeTables` and commit or roll it back.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from obsmem.clock import Clock, SystemClock
from obsmem.errors import ObsmemError
from obsmem.knowledge.store import erasure
from obsmem.knowledge.store.contract import (
    DEFAULT_VIEW,
    ActivityEvent,
    ForgottenValue,
    KnowledgeDump,
    LexicalHit,
    MentionTarget,
    Node,
    OutboxEntry,
    Page,
    Record,
    RecordDraft,
    RecordView,
    StoredVector,
    Tombstone,
    TrustState,
)
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.ops import KnowledgeMutations
from obsmem.knowledge.store.outbox import claim_outbox, finish_outbox, lease_of, put_claimed_vector, queue_reembed
from obsmem.knowledge.store.reads import KnowledgeReads, check_limit
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.knowledge.store.tables import KnowledgeTables
from obsmem.knowledge.store.values import check_instant
from obsmem.storage.contract import ClosingContext

__all__ = ["TablesKnowledgeStore"]

T = TypeVar("T")


class TablesKnowledgeStore(ClosingContext):
    """Everything but the transaction; see :mod:`obsmem.knowledge.store.contract`."""

    url: str

    def __init__(self, *, clock: Clock | None = None, ids: UlidGenerator | None = None) -> None:
        self.clock = clock or SystemClock()
        self.ids = ids or UlidGenerator(self.clock)

    @abstractmethod
    async def _transact(self, write: bool, fn: Callable[[KnowledgeTables], T]) -> T:
        """Run ``fn`` in one transaction; commit if it returns, roll back if it raises."""

    async def _write(self, fn: Callable[[KnowledgeMutations], T]) -> T:
        """Run one mutation; a refused one rolls back, then its ``write-refused`` event is logged."""
        stamp = self.clock.now()
        attempts: list[KnowledgeMutations] = []

        def mutate(tables: KnowledgeTables) -> T:
            attempts.append(KnowledgeMutations(tables, self.ids, stamp))
            return fn(attempts[-1])

        try:
            return await self._transact(True, mutate)
        except ObsmemError:
            refusal = attempts[-1].refusal if attempts else None
            if refusal is None:
                raise
            await self._transact(True, lambda tables: tables.add_event(refusal))
            raise

    async def _read(self, fn: Callable[[KnowledgeReads], T]) -> T:
        return await self._transact(False, lambda tables: fn(KnowledgeReads(tables)))

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
    ) -> Node:
        return await self._write(
            lambda m: m.create_node(
                name,
                kind,
                scope,
                actor=actor,
                reason=reason,
                content=content,
                description=description,
                metadata=metadata,
                mentions=mentions,
                node_id=node_id,
            )
        )

    async def get_node(self, node_id: str, scope: str) -> Node | None:
        return await self._read(lambda r: r.node(node_id, scope))

    async def load_node(self, node_id: str) -> Node | None:
        return await self._transact(False, lambda tables: tables.node(node_id))

    async def resolve_node(self, name: str, scope: str) -> Node | None:
        return await self._read(lambda r: r.resolve(name, scope))

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
        return await self._write(
            lambda m: m.update_node(
                node_id,
                expected_version,
                scope=scope,
                actor=actor,
                reason=reason,
                name=name,
                kind=kind,
                content=content,
                description=description,
                mentions=mentions,
            )
        )

    async def merge_nodes(
        self, source_id: str, target_id: str, source_version: int, *, scope: str, actor: str, reason: str
    ) -> Node | None:
        return await self._write(
            lambda m: m.merge_nodes(
                source_id, target_id, source_version, scope=scope, actor=actor, reason=reason
            )
        )

    async def list_nodes(
        self,
        scope: str,
        *,
        name_prefix: str | None = None,
        kind: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Node]:
        return await self._read(lambda r: r.nodes(scope, name_prefix, kind, after, limit))

    # -- records -------------------------------------------------------------------------------
    async def append_record(self, draft: RecordDraft, *, actor: str, reason: str) -> Record:
        return await self._write(lambda m: m.append_record(draft, actor=actor, reason=reason))

    async def get_record(self, record_id: str, scope: str, view: RecordView = DEFAULT_VIEW) -> Record | None:
        return await self._read(lambda r: r.record(record_id, scope, view))

    async def load_record(self, record_id: str) -> Record | None:
        return await self._transact(False, lambda tables: tables.record(record_id))

    async def remove_record(
        self, record_id: str, scope: str, *, actor: str, reason: str, tombstone: bool = False,
        superseded_by: str | None = None, reason_within: tuple[str, str] | None = None,
    ) -> Record:
        return await self._write(
            lambda m: m.remove_record(record_id, scope, actor=actor, reason=reason, tombstone=tombstone,
                                      superseded_by=superseded_by, reason_within=reason_within)
        )

    async def restore_record(self, record_id: str, scope: str, *, actor: str, reason: str) -> Record:
        return await self._write(lambda m: m.restore_record(record_id, scope, actor=actor, reason=reason))

    async def rescope_record(
        self, record_id: str, scope: str, new_scope: str, *, actor: str, reason: str
    ) -> Record:
        return await self._write(
            lambda m: m.rescope_record(record_id, scope, new_scope, actor=actor, reason=reason)
        )

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
        return await self._write(
            lambda m: m.raise_ceiling(
                record_id, scope, ceiling, actor=actor, reason=reason, privileged=privileged
            )
        )

    async def set_trust(
        self,
        record_id: str,
        scope: str,
        trust: TrustState,
        *,
        actor: str,
        reason: str,
        tombstone: bool = False,
    ) -> Record:
        return await self._write(
            lambda m: m.set_trust(record_id, scope, trust, actor=actor, reason=reason, tombstone=tombstone)
        )

    async def add_tombstone(
        self, node_id: str, scope: str, value: str, *, actor: str, reason: str
    ) -> Tombstone:
        return await self._write(lambda m: m.add_tombstone(node_id, scope, value, actor=actor, reason=reason))

    async def list_tombstones(self, scope: str) -> list[Tombstone]:
        keys = Scope.parse(scope).visible_keys()
        return await self._transact(
            False, lambda tables: sorted(tables.tombstones_in(keys), key=lambda t: t.id)
        )

    # -- record reads --------------------------------------------------------------------------
    async def list_about(
        self,
        node_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]:
        return await self._read(lambda r: r.about(node_id, scope, view, after, limit))

    async def list_about_attributes(
        self, node_id: str, scope: str, attributes: Sequence[str], *, view: RecordView = DEFAULT_VIEW
    ) -> list[Record]:
        """The records about the node with one of ``attributes`` that ``scope`` sees (as
        :meth:`list_about` shows them), newest first: read by those attributes, not a page of the
        node's records. All of their timelines, superseded records too where ``view`` shows them;
        not part of :class:`~obsmem.knowledge.store.contract.KnowledgeStore` (a store of your own
        may leave it out: its callers then page :meth:`list_about`)."""
        wanted = list(attributes)
        return await self._read(lambda r: r.about_attributes(node_id, scope, view, wanted))

    async def list_mentioning(
        self,
        node_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]:
        return await self._read(lambda r: r.mentioning(node_id, scope, view, after, limit))

    async def list_related(
        self,
        node_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]:
        return await self._read(lambda r: r.related(node_id, scope, view, after, limit))

    async def list_by_source(
        self,
        source_thread_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]:
        return await self._read(lambda r: r.by_source(source_thread_id, scope, view, after, limit))

    async def list_superseded_by(
        self,
        record_id: str,
        scope: str,
        *,
        view: RecordView = DEFAULT_VIEW,
        after: str | None = None,
        limit: int = 100,
    ) -> Page[Record]:
        return await self._read(lambda r: r.superseded_by(record_id, scope, view, after, limit))

    async def list_candidates(
        self, scope: str, *, after: str | None = None, limit: int = 100, within: bool = False,
        threads: bool = False,
    ) -> Page[Record]:
        return await self._read(lambda r: r.candidates(scope, after, limit, within=within, threads=threads))

    async def search_lexical(
        self, query: str, scope: str, *, view: RecordView = DEFAULT_VIEW, limit: int = 20
    ) -> list[LexicalHit]:
        return await self._read(lambda r: r.search(query, scope, view, limit))

    async def list_activity(
        self, scope: str, *, after: str | None = None, limit: int = 100, threads: bool = False
    ) -> Page[ActivityEvent]:
        return await self._read(lambda r: r.activity(scope, after, limit, threads=threads))

    # -- outbox and vectors ----------------------------------------------------------------------
    async def claim_outbox(
        self, worker_id: str, *, limit: int = 50, lease_seconds: float = 60.0, now: datetime | None = None,
        scope: str | None = None,
    ) -> list[OutboxEntry]:
        check_limit(limit)
        lease_of(lease_seconds)  # refused before any I/O
        subtree = Scope.parse(scope).key if scope is not None else None
        stamp = check_instant(now, "now") if now is not None else self.clock.now()
        return await self._transact(
            True, lambda t: claim_outbox(t, stamp, worker_id, limit, lease_seconds, subtree=subtree)
        )

    async def complete_outbox(self, worker_id: str, entry_ids: Sequence[str]) -> int:
        stamp = self.clock.now()
        return await self._transact(
            True, lambda t: finish_outbox(t, stamp, worker_id, entry_ids, complete=True)
        )

    async def release_outbox(
        self, worker_id: str, entry_ids: Sequence[str], *, retry_at: datetime | None = None
    ) -> int:
        stamp = self.clock.now()
        retry = check_instant(retry_at, "retry_at") if retry_at is not None else None
        return await self._transact(
            True, lambda t: finish_outbox(t, stamp, worker_id, entry_ids, complete=False, retry_at=retry)
        )

    async def list_outbox(self, *, include_completed: bool = False) -> list[OutboxEntry]:
        def read(tables: KnowledgeTables) -> list[OutboxEntry]:
            entries = tables.all_outbox() if include_completed else tables.open_outbox()
            return sorted(entries, key=lambda e: e.id)

        return await self._transact(False, read)

    async def put_vector(self, vector: StoredVector) -> None:
        await self._transact(True, lambda tables: tables.put_vector(vector))

    async def put_claimed_vector(self, worker_id: str, entry_id: str, vector: StoredVector) -> bool:
        return await self._transact(True, lambda tables: put_claimed_vector(tables, worker_id, entry_id, vector))

    async def delete_vector(self, document_id: str, scope: str | None = None) -> bool:
        return await self._transact(True, lambda tables: tables.delete_vector(document_id, scope))

    async def list_vectors(self, scope_keys: Sequence[str] | None = None) -> list[StoredVector]:
        keys = list(scope_keys) if scope_keys is not None else None
        return await self._transact(False, lambda tables: tables.vectors_in(keys))

    async def queue_reembed(
        self, embedder: str, *, dimensions: int | None = None, after: str | None = None, limit: int = 200,
        scope: str | None = None,
    ) -> tuple[int, str | None]:
        # Two transactions, each bounded by ``limit``: a read of the page's labels, and (only
        # when some other embedder made one) the write that queues those.
        check_limit(limit)
        subtree = Scope.parse(scope).key if scope is not None else None
        labels = await self._transact(False, lambda t: t.vector_labels(after, limit, subtree))
        stale = [
            label for label in labels
            if label.embedder != embedder or (dimensions is not None and label.dimensions != dimensions)
        ]  # fmt: skip
        queued = 0
        if stale:
            stamp = self.clock.now()
            queued = await self._transact(True, lambda t: queue_reembed(t, self.ids.new, stamp, stale))
        return queued, labels[-1].document_id if len(labels) == limit else None

    async def queue_unindexed(
        self, *, after: str | None = None, limit: int = 200, scope: str | None = None
    ) -> tuple[int, str | None]:
        # As queue_reembed: a bounded read of the page's record labels, and (only when some live
        # record there has no vector) the write that queues those.
        check_limit(limit)
        subtree = Scope.parse(scope).key if scope is not None else None
        labels = await self._transact(False, lambda t: t.record_labels(after, limit, subtree))
        missing = [label for label in labels if label.live and not label.indexed]
        queued = 0
        if missing:
            stamp = self.clock.now()
            queued = await self._transact(True, lambda t: queue_reembed(t, self.ids.new, stamp, missing))
        return queued, labels[-1].record_id if len(labels) == limit else None

    # -- lifecycle -----------------------------------------------------------------------------
    async def forget_value(
        self, value: str, scope: str, *, actor: str, reason: str, within: str | None = None
    ) -> dict[str, int]:
        return await self._write(
            lambda m: erasure.forget_value(m, value, scope, actor=actor, reason=reason, within=within)
        )

    async def erase_records(
        self, record_ids: Sequence[str], scope: str, *, actor: str, reason: str
    ) -> dict[str, int]:
        return await self._write(lambda m: erasure.erase_records(m, record_ids, scope, actor=actor, reason=reason))

    async def purge_scope(self, scope: str, *, actor: str, reason: str) -> dict[str, int]:
        return await self._write(lambda m: erasure.purge_scope(m, scope, actor=actor, reason=reason))

    async def list_forgotten(self, scope: str) -> list[ForgottenValue]:
        keys = Scope.parse(scope).visible_keys()
        return await self._transact(
            False, lambda tables: sorted(tables.forgotten_in(keys), key=lambda f: f.id)
        )

    async def list_scopes(self, *, resource: str | None = None) -> list[str]:
        if resource is not None:
            Scope("org", resource)  # refused before any I/O

        def wanted(key: str) -> bool:
            return resource is None or Scope.parse(key).resource == resource

        keys = await self._transact(False, lambda tables: tables.scope_keys(resource))
        return sorted(key for key in keys if wanted(key))

    async def dump_scope(self, scope: str) -> KnowledgeDump:
        Scope.parse(scope)  # refused before any I/O
        return await self._transact(False, lambda tables: erasure.dump_scope(tables, scope))

    async def restore_dump(self, dump: KnowledgeDump, *, subtree: str) -> dict[str, int]:
        Scope.parse(subtree)
        return await self._write(lambda m: erasure.restore_dump(m, dump, subtree=subtree))
