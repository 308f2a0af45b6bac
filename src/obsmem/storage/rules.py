"""The contract's rules every adapter applies identically.

The adapters differ only in how they find, lock and write rows; what a valid call is and what
it stores is decided here, once, so the conformance suite holds every adapter to the same
answers:

* **records**: a record's lineage matches its scope and ids, an update never changes which
  lineage or generation a record is, and per-thread cursors only move forward;
* **threads and messages**: no non-finite number in what is kept (:func:`check_storable`), a
  message belongs to the thread it is saved into, and appended markers are de-duplicated
  (:func:`merge_parts`);
* **leases**: the arguments of a lease call, and who may take or renew a lease;
* **the work queue**: the arguments of a call, when an item is claimable and which claim is
  current.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from obsmem.errors import InvalidInputError, StorageError
from obsmem.storage.contract import DeadWork, Lease, ObservationRecord, WorkItem, lineage_key
from obsmem.types import (
    DataPart,
    Message,
    Part,
    Thread,
    check_finite,
    check_storable_message,
    check_storable_thread,
)

__all__ = [
    "RECEIPT_KEY",
    "receipt_threads",
    "receipt_without_threads",
    "without_receipt_threads",
    "check_successor",
    "Owner",
    "ThreadOwner",
    "acquired_lease",
    "advanced_threads",
    "check_cursors_forward",
    "removed_threads",
    "check_limit",
    "check_lineage",
    "check_message_owner",
    "check_same_identity",
    "check_storable",
    "buried_work",
    "released_attempts",
    "claim_expiry",
    "holds_claim",
    "is_claimable",
    "lease_expiry",
    "merge_parts",
    "renewed_lease",
    "rewritten_generation",
    "work_available_at",
]

# -- records and messages ---------------------------------------------------------------------


def check_lineage(record: ObservationRecord) -> None:
    """A record's ``lineage`` must be the key its scope and ids produce, or lookups would miss it."""
    try:
        expected = lineage_key(record.scope, record.thread_id, record.resource_id)
    except ValueError as exc:
        raise InvalidInputError(f"Record '{record.id}': {exc}.") from exc
    if record.lineage != expected:
        raise InvalidInputError(
            f"Record '{record.id}' has lineage '{record.lineage}' but its scope and ids give "
            f"'{expected}'. Build it with lineage_key(scope, thread_id, resource_id)."
        )


def check_successor(current: ObservationRecord, successor: ObservationRecord) -> None:
    """A new generation continues ``current``'s lineage under a new id (and a lineage its scope
    and ids give)."""
    check_lineage(successor)
    if successor.lineage != current.lineage or successor.id == current.id:
        raise InvalidInputError(
            "A successor must continue the same lineage under a new id "
            f"(current '{current.id}' in '{current.lineage}', successor '{successor.id}' "
            f"in '{successor.lineage}')."
        )


def check_same_identity(stored: ObservationRecord, record: ObservationRecord) -> None:
    """An update may change a record's content, never which lineage or generation it is."""
    for field in ("lineage", "scope", "thread_id", "resource_id", "generation", "origin"):
        if getattr(stored, field) != getattr(record, field):
            raise InvalidInputError(
                f"Record '{stored.id}': an update cannot change '{field}' "
                f"({getattr(stored, field)!r} -> {getattr(record, field)!r})."
            )


#: Where a turn stores, on a reply, the receipt of the context it was made from
#: (:data:`obsmem.om.receipts.RECEIPT_KEY`): its ``groups`` name each thread shown (``[id,
#: thread_id, first_seq, last_seq, kind]``), its ``raw_span`` a thread (``[thread_id, first,
#: last]``).
RECEIPT_KEY = "obsmem_receipt"


def _names(entry: object, index: int) -> str | None:
    if isinstance(entry, list | tuple) and len(entry) > index:
        value = entry[index]
        if isinstance(value, str):
            return value
    return None


def receipt_threads(metadata: Mapping[str, Any]) -> set[str]:
    """The threads the receipt in a message's ``metadata`` names (none when it holds none)."""
    data = metadata.get(RECEIPT_KEY)
    if not isinstance(data, Mapping):
        return set()
    groups = data.get("groups")
    named = {t for g in groups if (t := _names(g, 1)) is not None} if isinstance(groups, list) else set()
    span = data.get("raw_span")
    if isinstance(span, list | tuple) and len(span) == 3 and isinstance(span[0], str):
        named.add(span[0])
    return named


def receipt_without_threads(data: object, gone: Collection[str]) -> dict[str, Any] | None:
    """A stored receipt without what names a thread of ``gone`` (deleted): its groups of those
    threads and a raw span of one (the rest, its hash included, as it was). None when it names
    none of them, or is not a receipt."""
    if not isinstance(data, Mapping):
        return None
    groups = data.get("groups")
    kept = [g for g in groups if _names(g, 1) not in gone] if isinstance(groups, list) else groups
    span = data.get("raw_span")
    names_span = isinstance(span, list | tuple) and len(span) == 3 and span[0] in gone
    if kept == groups and not names_span:
        return None
    changed = {**data, "groups": kept}
    if names_span:
        changed["raw_span"] = None
    return changed


def without_receipt_threads(messages: list[Message], gone: Collection[str]) -> list[Message]:
    """``messages`` with the receipts they carry naming no thread of ``gone``: what a save stores
    when a thread its reply's context showed was deleted while the reply was made (the delete's
    pass over the user's replies ran before this one was saved)."""
    if not gone:
        return messages
    out: list[Message] = []
    for message in messages:
        changed = receipt_without_threads(message.metadata.get(RECEIPT_KEY), gone)
        out.append(
            message if changed is None
            else message.model_copy(update={"metadata": {**message.metadata, RECEIPT_KEY: changed}})
        )
    return out


def removed_threads(stored: ObservationRecord, record: ObservationRecord) -> list[str]:
    """The threads ``stored`` keeps a state of that ``record`` leaves out (sorted): allowed only
    for threads that no longer exist (see :func:`check_cursors_forward`)."""
    return sorted(tid for tid in stored.threads if tid not in record.threads)


def check_cursors_forward(
    stored: ObservationRecord, record: ObservationRecord, *, gone: Collection[str] = ()
) -> None:
    """Refuse a write that would lower any per-thread cursor (a caller bug, never a race). A
    thread in ``gone`` (the store found it deleted, in the write's transaction) may be left out
    of ``record`` whole: deleting a thread takes its id out of the resource's record. (Its seqs
    are never reused, and a write that adds to a deleted thread is refused as ``gone``.)"""
    for thread_id, state in stored.threads.items():
        if thread_id in gone and thread_id not in record.threads:
            continue
        if record.cursor(thread_id) < state.cursor:
            raise StorageError(
                f"Refusing to move the cursor of thread '{thread_id}' in lineage "
                f"'{stored.lineage}' backward from {state.cursor} to {record.cursor(thread_id)}. "
                "Cursors only advance; build the write from the stored record."
            )


def advanced_threads(stored: ObservationRecord | None, record: ObservationRecord) -> set[str]:
    """The threads a resource-scoped write adds observations for: a cursor that moves forward
    (or appears) and buffered chunks that are new. Such a write is refused as ``gone`` when one
    of them no longer exists, so an observation in flight for a deleted thread never commits.
    A thread-scoped write is guarded by its own thread (an empty set here)."""
    if record.scope != "resource":
        return set()
    before = stored.threads if stored is not None else {}
    moved = {
        tid for tid, state in record.threads.items()
        if state.cursor > (before[tid].cursor if tid in before else 0)
    }
    known = {c.id for c in stored.buffered_chunks} if stored is not None else set()
    return moved | {c.thread_id for c in record.buffered_chunks if c.id not in known}


def rewritten_generation(stored: ObservationRecord, record: ObservationRecord) -> ObservationRecord:
    """``record``'s content in ``stored``'s place: identity, chain links, version and creation
    time stay the stored ones (see ``Store.rewrite_generation``)."""
    return record.model_copy(
        update={
            key: getattr(stored, key)
            for key in (
                "id", "lineage", "scope", "thread_id", "resource_id", "generation", "origin", "version",
                "superseded_by", "created_at",
            )
        },
        deep=True,
    )


class ThreadOwner(NamedTuple):
    """A thread's id and resource, read without the rest of its row (a save needs no more)."""

    id: str
    resource_id: str


class Owner(Protocol):
    """What :func:`check_message_owner` reads of a thread (a :class:`~obsmem.types.Thread` will do)."""

    @property
    def id(self) -> str: ...

    @property
    def resource_id(self) -> str: ...


def check_storable(thread: Thread | None = None, messages: Iterable[Message] = ()) -> None:
    """Refuse, before anything is written, a thread or messages holding what no store keeps as
    it is: NaN or ±Infinity in thread or message metadata or in a data part's data (SQLite and
    PostgreSQL would write null, the in-memory store the number)."""
    if thread is not None:
        check_storable_thread(thread)
    for index, message in enumerate(messages):
        check_storable_message(message, f"messages[{index}]")


def check_message_owner(message: Message, thread: Owner) -> None:
    """A message saved into a thread may not claim to belong to another thread or resource."""
    if message.thread_id is not None and message.thread_id != thread.id:
        raise InvalidInputError(
            f"Message '{message.id}' says thread '{message.thread_id}' but is being saved "
            f"into thread '{thread.id}'."
        )
    if message.resource_id is not None and message.resource_id != thread.resource_id:
        raise InvalidInputError(
            f"Message '{message.id}' says resource '{message.resource_id}' but thread "
            f"'{thread.id}' belongs to resource '{thread.resource_id}'."
        )


def _part_key(part: DataPart) -> tuple[str, str] | None:
    if "cycle_id" not in part.data:
        return None
    return part.name, json.dumps(part.data["cycle_id"], sort_keys=True, default=str)


def merge_parts(existing: Iterable[Part], new: Iterable[DataPart]) -> tuple[Part, ...]:
    """``existing`` plus the parts of ``new`` that are not already there.

    A data part carrying ``data["cycle_id"]`` is a duplicate when a data part with the same
    ``(name, cycle_id)`` exists; one without a cycle id is a duplicate only when an identical
    part exists. Either way a retried append is a no-op.
    """
    added = list(new)
    for number, part in enumerate(added):  # nothing appended holds a number no store keeps
        if isinstance(part, DataPart):
            check_finite(part.data, f"parts[{number}].data")
    parts: list[Part] = list(existing)
    keys = {key for p in parts if isinstance(p, DataPart) and (key := _part_key(p)) is not None}
    for part in added:
        if not isinstance(part, DataPart):
            raise InvalidInputError(
                f"add_message_parts only appends data parts (markers), got a '{part.type}' part."
            )
        key = _part_key(part)
        if key is None:
            if part in parts:
                continue
        elif key in keys:
            continue
        else:
            keys.add(key)
        parts.append(part)
    return tuple(parts)


# -- leases ------------------------------------------------------------------------------------


def lease_expiry(key: str, owner: str, ttl_s: float, now: datetime) -> datetime:
    """Check the arguments of a lease call and return when the lease would expire."""
    if not key or not owner:
        raise InvalidInputError("A lease needs a non-empty key and a non-empty owner.")
    if now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(
            f"Lease '{key}': 'now' must be timezone-aware (wall-clock UTC), got naive {now!r}."
        )
    if isinstance(ttl_s, bool) or not math.isfinite(ttl_s) or ttl_s <= 0:
        raise InvalidInputError(f"Lease '{key}': ttl_s must be a positive number of seconds, got {ttl_s!r}.")
    try:
        return now + timedelta(seconds=ttl_s)
    except OverflowError as exc:
        raise InvalidInputError(f"Lease '{key}': ttl_s={ttl_s!r} is too long.") from exc


def acquired_lease(
    stored: Lease | None,
    key: str,
    owner: str,
    now: datetime,
    expires_at: datetime,
    new_token: Callable[[], int],
) -> Lease | None:
    """What ``acquire_lease`` stores, given the stored lease; None when another owner holds it.

    ``new_token`` is called only for a new acquisition (free, released or expired key), never
    for a renewal by the holder, so a renewal keeps its token and does not use up a number.
    """
    if stored is not None and not stored.is_expired(now):
        if stored.owner != owner:
            return None
        return stored.model_copy(update={"expires_at": expires_at})
    return Lease(key=key, owner=owner, token=new_token(), acquired_at=now, expires_at=expires_at)


def renewed_lease(stored: Lease | None, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    """What ``renew_lease`` stores; None when ``owner`` no longer holds an unexpired lease."""
    if stored is None or stored.owner != owner or stored.is_expired(now):
        return None
    return stored.model_copy(update={"expires_at": expires_at})


# -- the work queue ----------------------------------------------------------------------------


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


def released_attempts(stored: WorkItem, error: str | None, count_attempt: bool) -> tuple[int, str | None]:
    """The ``(attempts, last_error)`` a release stores for the claimed item ``stored``.

    A counted release (a failure) keeps the claim's attempt and records ``error``; an uncounted
    hand-back (the work only had to wait) gives the attempt back and keeps the last real error."""
    if isinstance(count_attempt, bool) is False:
        raise InvalidInputError(f"release_work: count_attempt must be True or False, got {count_attempt!r}.")
    if count_attempt:
        return stored.attempts, error
    return max(0, stored.attempts - 1), stored.last_error


def buried_work(stored: WorkItem, now: datetime, error: str | None) -> DeadWork:
    """The dead-letter row ``bury_work`` stores for the claimed item ``stored``."""
    _check_now(now, f"Burying work '{stored.kind}' on '{stored.target}'")
    return DeadWork(
        id=stored.id, kind=stored.kind, target=stored.target, payload=dict(stored.payload),
        enqueued_at=stored.enqueued_at, attempts=stored.attempts,
        last_error=error if error is not None else stored.last_error, failed_at=now,
    )
