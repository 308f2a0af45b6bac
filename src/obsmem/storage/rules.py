"""The work-queue rules every adapter applies identically (argument checks, who may claim what).

The adapters differ only in how they find and lock rows; what a valid call is, when an item is
claimable and which claim is current are decided here, once, so the conformance suite holds
every adapter to the same answers.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from obsmem.errors import InvalidInputError
from obsmem.storage.contract import WorkItem

__all__ = ["check_limit", "claim_expiry", "holds_claim", "is_claimable", "work_available_at"]


def _check_now(now: datetime, what: str) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"{what}: 'now' must be timezone-aware (wall-clock UTC), got naive {now!r}.")


def _after(now: datetime, seconds: float, what: str, *, allow_zero: bool) -> datetime:
    bad = isinstance(seconds, bool) or not math.isfinite(seconds) or seconds < 0 or (not allow_zero and seconds == 0)
    if bad:
        kind = "a non-negative" if allow_zero else "a positive"
        raise InvalidInputError(f"{what}: expected {kind} number of seconds, got {seconds!r}.")
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError as exc:
        raise InvalidInputError(f"{what}: {seconds!r} seconds is too long.") from exc


def work_available_at(kind: str, target: str, now: datetime, delay_s: float) -> datetime:
    """Check ``enqueue_work`` / ``release_work`` arguments; when the item becomes claimable."""
    if not kind or not target:
        raise InvalidInputError("Work needs a non-empty kind and a non-empty target (e.g. 'observe', a thread id).")
    _check_now(now, f"Work '{kind}' on '{target}'")
    return _after(now, delay_s, f"Work '{kind}' on '{target}': delay_s", allow_zero=True)


def claim_expiry(owner: str, ttl_s: float, now: datetime) -> datetime:
    """Check a claim's arguments; when the claim would expire."""
    if not owner:
        raise InvalidInputError("Claiming work needs a non-empty owner (e.g. 'host:pid:worker-1').")
    _check_now(now, f"Work claim by '{owner}'")
    return _after(now, ttl_s, f"Work claim by '{owner}': ttl_s", allow_zero=False)


def check_limit(limit: int) -> None:
    if isinstance(limit, bool) or limit < 1:
        raise InvalidInputError(f"claim_work: limit must be at least 1, got {limit!r}.")


def is_claimable(item: WorkItem, now: datetime) -> bool:
    """Waiting and due, or claimed by someone whose claim has expired."""
    if item.claimed_by is None:
        return item.available_at <= now
    return item.claim_expired(now)


def holds_claim(stored: WorkItem, item: WorkItem) -> bool:
    """Whether ``item`` (as its worker last saw it) is still the stored, current claim."""
    return (
        item.claim_token is not None
        and stored.claim_token == item.claim_token
        and stored.claimed_by == item.claimed_by
    )
