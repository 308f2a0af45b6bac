"""Claiming and finishing semantic-outbox entries, written once against :class:`KnowledgeTables`.

Workers that keep the vector index in step claim entries with a lease. The rules:

* oldest first, and **one open entry per document at a time**: an entry is skipped while an
  earlier entry for the same document is not completed, so a document's delete can never
  overtake its upsert (or the reverse) even with several workers;
* an entry is claimable when it is pending and available, or when it is being processed under
  a claim whose lease has expired (its worker is presumed dead); every claim counts an attempt;
* only the worker holding the claim can complete or release it; a release puts the entry back
  to pending, available again at ``retry_at``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from obsmem.knowledge.store.contract import OutboxEntry
from obsmem.knowledge.store.tables import KnowledgeTables

__all__ = ["claim_outbox", "finish_outbox"]


def claim_outbox(
    tables: KnowledgeTables, now: datetime, worker_id: str, limit: int, lease_seconds: float
) -> list[OutboxEntry]:
    lease = timedelta(seconds=lease_seconds)
    blocked: set[str] = set()
    claimed: list[OutboxEntry] = []
    for entry in tables.open_outbox():
        if entry.document_id in blocked:
            continue
        blocked.add(entry.document_id)
        expired = entry.claimed_at is not None and entry.claimed_at + lease <= now
        eligible = entry.available_at <= now and (entry.status == "pending" or expired)
        if eligible and len(claimed) < limit:
            taken = entry.model_copy(
                update={
                    "status": "processing",
                    "claimed_at": now,
                    "claimed_by": worker_id,
                    "attempts": entry.attempts + 1,
                }
            )
            tables.save_outbox(taken)
            claimed.append(taken)
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
    wanted = set(entry_ids)
    changed = 0
    for entry in tables.open_outbox():
        if entry.id not in wanted or entry.status != "processing" or entry.claimed_by != worker_id:
            continue
        if complete:
            update: dict[str, Any] = {"status": "completed", "completed_at": now}
        else:
            update = {
                "status": "pending",
                "claimed_at": None,
                "claimed_by": None,
                "available_at": retry_at or now,
            }
        tables.save_outbox(entry.model_copy(update=update))
        changed += 1
    return changed
