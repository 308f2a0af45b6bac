"""Claiming and finishing semantic-outbox entries, written once against :class:`KnowledgeTables`.

Workers that keep the vector index in step claim entries with a lease. The rules:

* oldest first, and **one open entry per document at a time**: an entry is skipped while an
  earlier entry for the same document is not completed, so a document's delete can never
  overtake its upsert (or the reverse) even with several workers;
* an entry is claimable when it is pending and available, or when it is being processed under
  a claim whose lease has expired (its worker is presumed dead); every claim counts an attempt.
  The lease is the holder's, kept on the entry (:attr:`OutboxEntry.lease_seconds`): a worker
  asking with a short lease never takes over an entry held under a longer one before it ends;
* only the worker holding the claim can complete or release it; a release puts the entry back
  to pending, available again at ``retry_at``.

An entry claimed by an obsmem from before a522022 keeps no holder's lease. Its holder was a
``Knowledge.drain`` (:data:`DRAIN_LEASE_SECONDS`) unless it called the store itself, so it
expires by the longer of that and the claiming worker's lease.

``lease_seconds`` is any finite number >= 0 (:func:`lease_of`); one longer than Python's
longest duration is that duration, a lease that never expires. An expiry is tested as
``now - claimed_at >= lease``, which cannot overflow, never as ``claimed_at + lease``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from obsmem.errors import InvalidInputError
from obsmem.knowledge.store.contract import OutboxEntry, StoredVector, TrustState
from obsmem.knowledge.store.tables import KnowledgeTables, RecordLabel, VectorLabel, under

__all__ = [
    "DRAIN_LEASE_SECONDS", "claim_outbox", "finish_outbox", "lease_of", "put_claimed_vector", "queue_reembed",
]

DRAIN_LEASE_SECONDS = 60.0
"""The lease :meth:`SemanticIndex.drain` claims with, unless told another."""

_PAGE = 100  # open entries a claim reads at a time (at least twice its limit)


def lease_of(lease_seconds: float) -> timedelta:
    """``lease_seconds`` as a duration (at most :attr:`timedelta.max`), or
    :class:`~obsmem.errors.InvalidInputError` naming it unless it is a finite number >= 0."""
    if (
        isinstance(lease_seconds, bool)
        or not isinstance(lease_seconds, int | float)
        or not (math.isfinite(lease_seconds) and lease_seconds >= 0)
    ):
        raise InvalidInputError(
            f"lease_seconds must be a finite number of seconds >= 0, not {lease_seconds!r}",
            argument="lease_seconds",
        )
    if lease_seconds >= timedelta.max.total_seconds():
        return timedelta.max
    return timedelta(seconds=lease_seconds)


def claim_outbox(
    tables: KnowledgeTables, now: datetime, worker_id: str, limit: int, lease_seconds: float,
    *, subtree: str | None = None,
) -> list[OutboxEntry]:
    """Claim up to ``limit`` entries by the rules above; with ``subtree`` (a scope key), only
    entries stored at it or below it: another scope's entry is left, and blocks its document."""
    lease = lease_of(lease_seconds)
    unrecorded = max(lease, timedelta(seconds=DRAIN_LEASE_SECONDS))  # an old version's claim
    blocked: set[str] = set()
    claimed: list[OutboxEntry] = []
    page_size = max(2 * limit, _PAGE)
    after: str | None = None
    while len(claimed) < limit:
        # Oldest first, a page at a time, stopping once ``limit`` are claimed: a claim reads the
        # open entries ahead of what it takes (held by others, or waiting to retry), never the
        # whole backlog nor the completed history.
        page = tables.open_outbox(after, page_size)
        for entry in page:
            if len(claimed) == limit:
                break
            if entry.document_id in blocked:
                continue
            blocked.add(entry.document_id)
            if subtree is not None and not under(entry.scope, subtree):
                continue
            held_for = unrecorded if entry.lease_seconds is None else lease_of(entry.lease_seconds)
            expired = entry.claimed_at is not None and now - entry.claimed_at >= held_for
            if entry.available_at <= now and (entry.status == "pending" or expired):
                taken = entry.model_copy(
                    update={
                        "status": "processing",
                        "claimed_at": now,
                        "claimed_by": worker_id,
                        "lease_seconds": lease.total_seconds(),
                        "attempts": entry.attempts + 1,
                    }
                )
                tables.save_outbox(taken)
                claimed.append(taken)
        if len(page) < page_size:
            break
        after = page[-1].id
    return claimed


def finish_outbox(
    tables: KnowledgeTables,
    now: datetime,
    worker_id: str,
    entry_ids: Sequence[str],
    *,
    complete: bool,
    retry_at: datetime | None = None,
) -> int:
    """Complete (or release) the listed entries this worker holds; returns how many changed."""
    changed = 0
    for entry in tables.outbox_entries(entry_ids):
        if entry.status != "processing" or entry.claimed_by != worker_id:
            continue
        if complete:
            update: dict[str, Any] = {"status": "completed", "completed_at": now}
        else:
            update = {
                "status": "pending",
                "claimed_at": None,
                "claimed_by": None,
                "lease_seconds": None,
                "available_at": retry_at or now,
            }
        tables.save_outbox(entry.model_copy(update=update))
        changed += 1
    return changed


def put_claimed_vector(tables: KnowledgeTables, worker_id: str, entry_id: str, vector: StoredVector) -> bool:
    """Store the vector an upsert entry computed, only while ``worker_id`` still holds the entry
    and its record is live; whether it was stored. The embedding is computed between the claim
    and this write, outside any transaction: meanwhile an erase or a purge may have deleted the
    record with its entries and vectors, or the lease may have run out and another worker taken
    the entry over (and a later delete of the document applied); a vector written then would
    stay in the store for a record that has none."""
    held = tables.outbox_entries([entry_id])
    if not held or held[0].status != "processing" or held[0].claimed_by != worker_id:
        return False
    record = tables.record(vector.record_id)
    if record is None or record.deleted_at is not None or record.trust is TrustState.REJECTED:
        return False
    tables.put_vector(vector)
    return True


def queue_reembed(
    tables: KnowledgeTables, new_id: Callable[[], str], now: datetime, labels: Sequence[VectorLabel | RecordLabel]
) -> int:
    """Queue an upsert for each labelled vector (or record without one) whose record is still
    stored, so the index worker embeds it (again) with its own embedder; returns how many were
    queued. The worker applies it like any other upsert: one open entry per document, an erase
    deletes it with the record, and a record deleted or rejected since loses its vector. Each key
    is new: a record may need re-embedding again after the embedder changes back."""
    queued = 0
    for label in labels:
        if tables.record(label.record_id) is None:
            continue  # erased since the labels were read; the erase took its vector too
        entry_id = new_id()
        tables.save_outbox(
            OutboxEntry(
                id=entry_id,
                idempotency_key=f"{label.document_id}:reembed:{entry_id}",
                document_id=label.document_id,
                record_id=label.record_id,
                operation="upsert",
                scope=label.scope,
                available_at=now,
                created_at=now,
            )
        )
        queued += 1
    return queued
