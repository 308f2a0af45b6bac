"""The semantic index: draining the outbox into vectors, and fused lexical + semantic search.

Storage writes never call the embedder. Every change that affects a record's vector leaves an
outbox entry; :meth:`SemanticIndex.drain` claims entries in batches (oldest first, one open
entry per document at a time), applies them, and completes them. The vectors live in the
knowledge store keyed by document id, under the record's *current* scope, so after a drain the
index holds exactly one vector per live record and a rescoped record no longer answers queries
from its old scope.

Vectors made by another embedder than the index's are not searched; after the embedder changes,
drains queue them again for re-embedding a page at a time, and :meth:`SemanticIndex.reindex`
all at once (see :meth:`SemanticIndex.drain`). A live record with no vector at all (its row lost:
a table restored without it, the vectors deleted to reset the index) is embedded the same way.

:meth:`SemanticIndex.search` drains first (fresh writes are searchable), queries the vectors of
each scope on the caller's chain, re-reads every hit through the store's visibility rules (a
vector is never trusted to say who may see it), and fuses the semantic ranking with the
store's lexical ranking by reciprocal rank. A skill node the learn agent wrote is served only
while at least two of the records it was learned from are (:func:`~obsmem.knowledge.repeats.serves_skill`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal
from weakref import WeakKeyDictionary

import numpy as np

from obsmem.embeddings import Embedder
from obsmem.errors import StaleSemanticIndexError
from obsmem.knowledge.repeats import serves_skill
from obsmem.knowledge.store.contract import (
    DEFAULT_VIEW,
    KnowledgeStore,
    OutboxEntry,
    Record,
    RecordView,
    StoredVector,
    TrustState,
    record_document_id,
)
from obsmem.knowledge.store.outbox import DRAIN_LEASE_SECONDS
from obsmem.knowledge.store.reads import check_limit
from obsmem.knowledge.store.scopes import Scope

__all__ = ["REEMBED_PAGE", "RRF_K", "KnowledgeHit", "SemanticIndex", "reciprocal_rank_fusion"]

RRF_K = 60
BATCH_SIZE = 50
MAX_BATCHES = 100
REEMBED_PAGE = 200
"""Stored vectors a drain (and each step of a reindex) looks at for another embedder's, and
records it looks at for one without a vector."""
MAX_LIMIT = 1000
"""The most results one search returns (and the store's reads take)."""


@dataclass
class _ReembedScan:
    """The drains' look through one store object for another embedder's vectors, per embedder
    (its name and dimension): the document id each has reached (absent: not started; None:
    done), and those whose page a drain is queueing now. Concurrent drains (a server's requests)
    queue each page once: a drain that finds its embedder's page being queued leaves it to that
    one, where each would otherwise queue, and embed, the same page again."""

    reached: dict[tuple[str, int | None], str | None] = field(default_factory=dict)
    busy: set[tuple[str, int | None]] = field(default_factory=set)
    # The look through the records for those without a vector (any embedder's will do): the
    # record id reached (None: not started), whether it is done, and whether a drain is at it now.
    unindexed_reached: str | None = None
    unindexed_done: bool = False
    unindexed_busy: bool = False


_REEMBED_SCANS: WeakKeyDictionary[KnowledgeStore, _ReembedScan] = WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class KnowledgeHit:
    """One search result; ``score`` is the fused reciprocal-rank score (higher is better)."""

    kind: Literal["node", "record"]
    id: str
    node_id: str
    text: str
    scope: str
    score: float
    record: Record | None = None


def reciprocal_rank_fusion(rankings: list[list[str]], k: int = RRF_K) -> dict[str, float]:
    """Σ 1 / (k + rank) over the rankings each key appears in (rank starts at 1)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


class SemanticIndex:
    """Keeps the store's vectors in step with its records, and searches them."""

    def __init__(
        self, store: KnowledgeStore, embedder: Embedder, *, worker_id: str | None = None, reembed: bool = True
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.worker_id = worker_id or f"knowledge-index-{uuid.uuid4().hex[:12]}"
        self.reembed = reembed  # drains re-embed other embedders' vectors (see drain)

    async def drain(self, *, lease_seconds: float = DRAIN_LEASE_SECONDS) -> int:
        """Apply every claimable outbox entry; return how many were applied.

        Each drain first queues one page (:data:`REEMBED_PAGE` vectors) of the vectors another
        embedder (or this one with another dimension) made, until the indexes over this store
        object with this embedder have looked at every stored vector once (a server's
        per-request ``Knowledge`` over one store goes on where the last left off; of drains at
        the same time, one queues the page): after the embedder changes, old records are
        re-embedded a page per drain (a search drains), and found by their words meanwhile.
        :meth:`reindex` does the rest at once.

        After the outbox is applied (a record written and not yet drained has no vector, and its
        entry is applied there, not queued twice), the drain likewise queues one page of
        :data:`REEMBED_PAGE` records and embeds those of them that are live and have no vector
        at all, until the records have been looked through once per store object.

        Neither with ``reembed`` off (a :class:`~obsmem.knowledge.Knowledge` left at the default
        embedder: a tool or worker opened on the store converts no one's vectors, and gives the
        records without one none of its own, which the application's drains would re-embed)."""
        if not self.reembed:
            return await self._drain_outbox(lease_seconds)
        scan = _REEMBED_SCANS.setdefault(self.store, _ReembedScan())
        key = (self.embedder.name, self._dimensions())
        queued = 0
        if scan.reached.get(key, "") is not None and key not in scan.busy:
            scan.busy.add(key)
            try:
                queued, scan.reached[key] = await self.store.queue_reembed(
                    key[0], dimensions=key[1], after=scan.reached.get(key), limit=REEMBED_PAGE
                )
            finally:
                scan.busy.discard(key)
        applied = await self._drain_outbox(lease_seconds, queued)
        if scan.unindexed_done or scan.unindexed_busy:
            return applied
        scan.unindexed_busy = True
        try:
            filled, after = await self.store.queue_unindexed(after=scan.unindexed_reached, limit=REEMBED_PAGE)
            scan.unindexed_reached, scan.unindexed_done = after, after is None
        finally:
            scan.unindexed_busy = False
        return applied + (await self._drain_outbox(lease_seconds, filled) if filled else 0)

    async def reindex(self, *, scope: str | None = None) -> int:
        """Re-embed every record whose vector another embedder made, then embed every live
        record that has no vector (with ``scope``: only those stored at that scope or below it),
        a page at a time, each page queued through the outbox and drained before the next is read
        (with ``scope``, only that subtree's outbox entries are applied: no other scope's record
        is read); returns how many were queued."""
        queued, after = 0, None
        while True:
            count, after = await self.store.queue_reembed(
                self.embedder.name, dimensions=self._dimensions(), after=after, limit=REEMBED_PAGE,
                scope=scope,
            )
            queued += count
            await self._drain_outbox(DRAIN_LEASE_SECONDS, count, scope=scope)
            if after is None:
                break
        # After the outbox is applied above: a record written and not yet drained has no vector
        # until then, and is not queued twice.
        while True:
            count, after = await self.store.queue_unindexed(after=after, limit=REEMBED_PAGE, scope=scope)
            queued += count
            if count:
                await self._drain_outbox(DRAIN_LEASE_SECONDS, count, scope=scope)
            if after is None:
                return queued

    def _dimensions(self) -> int | None:
        # An embedder written before its protocol named ``dimensions`` is compared by name only.
        dimensions = getattr(self.embedder, "dimensions", None)
        return dimensions if isinstance(dimensions, int) else None

    async def _drain_outbox(
        self, lease_seconds: float, reembeds: int = 0, *, scope: str | None = None
    ) -> int:
        # ``reembeds`` (just queued) get batches of their own on top of MAX_BATCHES: a backlog a
        # drain applies is applied with them, where they would have made it "drain again".
        batches = MAX_BATCHES + -(-reembeds // BATCH_SIZE)
        applied = 0
        for _ in range(batches):
            batch = await self.store.claim_outbox(
                self.worker_id, limit=BATCH_SIZE, lease_seconds=lease_seconds, scope=scope
            )
            if not batch:
                return applied
            try:
                await self._apply(batch)
            except Exception as exc:
                await self.store.release_outbox(self.worker_id, [e.id for e in batch])
                raise StaleSemanticIndexError(
                    f"The knowledge index could not apply {len(batch)} outbox entries ({exc}); they were "
                    "released and will be retried on the next drain."
                ) from exc
            await self.store.complete_outbox(self.worker_id, [e.id for e in batch])
            applied += len(batch)
        raise StaleSemanticIndexError(
            f"The knowledge outbox still has entries after {batches} batches; drain again."
        )

    async def _apply(self, batch: list[OutboxEntry]) -> None:
        to_embed: list[tuple[OutboxEntry, Record, str]] = []
        for entry in batch:
            if entry.operation == "delete":
                await self.store.delete_vector(entry.document_id, entry.scope)
                continue
            record = await self.store.load_record(entry.record_id)
            if record is None or record.deleted_at is not None or record.trust is TrustState.REJECTED:
                await self.store.delete_vector(entry.document_id)
                continue
            node = await self.store.load_node(record.node_id)
            name = node.name if node is not None else ""
            to_embed.append((entry, record, f"{name}: {record.text}" if name else record.text))
        if not to_embed:
            return
        matrix = await self.embedder.embed([text for _, _, text in to_embed])
        for (entry, record, _), row in zip(to_embed, matrix, strict=True):
            # Keyed by document id: writing under the current scope replaces any older vector.
            # Only while this worker still holds the entry and the record lives: the embedding
            # took time in which an erase may have deleted both, or another worker taken over.
            await self.store.put_claimed_vector(
                self.worker_id, entry.id,
                StoredVector(record_document_id(record.id), record.id, record.scope, self.embedder.name, row),
            )

    async def semantic(self, query: str, scope: str, view: RecordView, limit: int) -> list[Record]:
        """Records ranked by cosine similarity, re-checked against the store's visibility."""
        vector = (await self.embedder.embed([query]))[0]
        best: dict[str, float] = {}
        for key in Scope.parse(scope).visible_keys():
            # Another embedder's vectors, or (the same name, another dimension) another length,
            # are not comparable: a drain re-embeds them.
            stored = [
                v for v in await self.store.list_vectors([key])
                if v.embedder == self.embedder.name and v.vector.shape == vector.shape
            ]  # fmt: skip
            if not stored:
                continue
            scores = np.stack([v.vector for v in stored]) @ vector
            for index in np.argsort(-scores)[: limit * 3]:
                if scores[index] <= 0.0:
                    break
                record_id = stored[index].record_id
                best[record_id] = max(best.get(record_id, -1.0), float(scores[index]))
        ranked: list[Record] = []
        for record_id in sorted(best, key=lambda rid: -best[rid]):
            record = await self.store.get_record(record_id, scope, view)
            if record is not None:
                ranked.append(record)
            if len(ranked) == limit:
                break
        return ranked

    async def search(
        self, query: str, scope: str, *, view: RecordView = DEFAULT_VIEW, limit: int = 10
    ) -> list[KnowledgeHit]:
        check_limit(limit)  # refused as given, before any I/O
        await self.drain()
        wider = min(max(limit * 3, 20), MAX_LIMIT)  # each side ranks more than it returns, within a read's limit
        lexical = await self.store.search_lexical(query, scope, view=view, limit=wider)
        semantic = await self.semantic(query, scope, view, wider)
        hits: dict[str, KnowledgeHit] = {}
        for hit in lexical:
            hits[f"{hit.kind}:{hit.id}"] = KnowledgeHit(
                hit.kind, hit.id, hit.node_id, hit.text, hit.scope, 0.0, hit.record
            )
        for record in semantic:
            hits.setdefault(
                f"record:{record.id}",
                KnowledgeHit("record", record.id, record.node_id, record.text, record.scope, 0.0, record),
            )
        fused = reciprocal_rank_fusion(
            [[f"{h.kind}:{h.id}" for h in lexical], [f"record:{r.id}" for r in semantic]]
        )
        ordered = sorted(hits, key=lambda key: (-fused[key], key))
        served: list[KnowledgeHit] = []
        for k in ordered:
            if len(served) == limit:
                break
            if hits[k].kind == "node":  # a learned skill is served only while its supports are
                node = await self.store.load_node(hits[k].id)
                if node is not None and not await serves_skill(self.store, node):
                    continue
            served.append(KnowledgeHit(
                hits[k].kind, hits[k].id, hits[k].node_id, hits[k].text, hits[k].scope, fused[k], hits[k].record,
            ))
        return served
