"""The in-memory store: the storage contract as executable code.

Use it in tests and for throwaway sessions; everything is lost when the object goes away.

Why it is still written carefully: it is the *reference* adapter. Every guarantee of
:mod:`obsmem.storage.contract` is implemented here in the plainest possible way, and the
conformance suite holds every other adapter to the same observable behaviour.

* **Atomicity without locks.** Each method does its reads and writes with no ``await`` in
  between, so on one event loop no other coroutine can interleave inside an operation. That
  is exactly the critical section the SQL adapters get from a transaction. (The store is not
  meant to be shared across threads or event loops.)
* **Copies in, copies out.** The models are frozen, but their ``dict`` fields are not; every
  stored object is a deep copy of what the caller passed and every returned object is a deep
  copy of what is stored, so no caller can change stored state behind the store's back.

The checks every adapter applies identically (record identity, lineage consistency, cursors
moving forward, marker de-duplication, who may take or renew a lease, the work queue's
arguments) live in :mod:`obsmem.storage.rules`, so the rules exist once.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from obsmem.calls import ModelCall, UsageRow
from obsmem.errors import (
    InvalidInputError,
    MessageNotFoundError,
    StoreClosedError,
    ThreadChangedError,
    ThreadNotFoundError,
)
from obsmem.storage.ledger import check_target, check_window, matches, sum_calls
from obsmem.storage.contract import (
    LEASE_PURGE_BATCH,
    ClosingContext,
    Lease,
    ObservationRecord,
    ThreadPage,
    WorkItem,
    WriteResult,
    lease_purge_before,
    lineage_key,
    rewriting,
    same_message,
    same_record,
    MAX_FORGOTTEN_IDS,
    saves_forgotten,
)
from obsmem.storage.contract import (
    DeadWork,
    LeaseCounts,
    WorkCounts,
    check_page_limit,
    lease_counts_of,
    may_hold_sections,
    work_counts_of,
)
from obsmem.storage.forgetting import forgotten_ids
from obsmem.storage.paging import newest_arguments
from obsmem.storage.rules import (
    acquired_lease,
    advanced_threads,
    buried_work,
    check_cursors_forward,
    receipt_threads,
    removed_threads,
    without_receipt_threads,
    check_limit,
    check_lineage,
    check_successor,
    check_message_owner,
    check_storable,
    check_same_identity,
    claim_expiry,
    holds_claim,
    is_claimable,
    lease_expiry,
    merge_parts,
    released_attempts,
    renewed_lease,
    rewritten_generation,
    work_available_at,
)
from obsmem.types import DataPart, Message, Thread, long_texts

__all__ = ["MemoryStore"]

ModelT = TypeVar("ModelT", bound=BaseModel)


def _copy(model: ModelT) -> ModelT:
    return model.model_copy(deep=True)


def _page(items: list[ModelT], limit: int | None, offset: int) -> list[ModelT]:
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("limit and offset must not be negative.")
    end = None if limit is None else offset + limit
    return items[offset:end]


# -- the adapter ----------------------------------------------------------------------------------


class MemoryStore(ClosingContext):
    """A :class:`~obsmem.storage.contract.Store` that keeps everything in dictionaries."""

    url: str

    def __init__(self) -> None:
        self.url = "memory://"
        self._closed = False
        self._seq = itertools.count(1)
        self._order = itertools.count(1)  # insertion order, the tie-break for equal timestamps
        self._threads: dict[str, Thread] = {}
        self._thread_order: dict[str, int] = {}
        self._activity = itertools.count(1)  # drawn at a thread's creation and each new message of it
        self._thread_activity: dict[str, int] = {}
        self._messages: dict[str, Message] = {}
        self._thread_messages: dict[str, list[str]] = {}  # ids in seq order
        self._forgotten: dict[str, set[str]] = {}  # every forgotten message id, per thread (note_forgotten_ids)
        self._records: dict[str, ObservationRecord] = {}
        self._record_order: dict[str, int] = {}
        self._lineages: dict[str, list[str]] = {}
        self._working_memory: dict[str, str] = {}
        self._leases: dict[str, Lease] = {}
        self._lease_tokens = itertools.count(1)  # store-wide, so tokens never repeat or go back
        self._work: dict[int, WorkItem] = {}
        self._work_ids = itertools.count(1)
        self._dead: dict[int, DeadWork] = {}
        self._claim_tokens = itertools.count(1)
        self._model_calls: list[ModelCall] = []

    async def close(self) -> None:
        self._closed = True

    def __repr__(self) -> str:
        return f"MemoryStore(threads={len(self._threads)}, messages={len(self._messages)})"

    def _open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    # -- schema ----------------------------------------------------------------------------------
    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Nothing to migrate: the in-memory store has no schema."""
        self._open()
        return []

    # -- threads ---------------------------------------------------------------------------------
    async def create_thread(self, thread: Thread) -> Thread:
        self._open()
        check_storable(thread)
        existing = self._threads.get(thread.id)
        if existing is not None:
            return _copy(existing)
        self._threads[thread.id] = _copy(thread)
        self._thread_order[thread.id] = next(self._order)
        self._thread_activity[thread.id] = next(self._activity)
        self._thread_messages[thread.id] = []
        return _copy(thread)

    async def get_thread(self, thread_id: str) -> Thread | None:
        self._open()
        thread = self._threads.get(thread_id)
        return _copy(thread) if thread else None

    async def list_threads(
        self, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None,
        since: datetime | None = None, newest_first: bool = False, before: str | None = None,
    ) -> list[Thread]:
        self._open()
        in_resource = [t for t in self._threads.values() if t.resource_id == resource_id]
        if newest_first or before is not None:
            _page([], limit, offset)
            mark = newest_arguments(newest_first, since, before)
            return self._newest_page(in_resource, limit, offset, after, mark)
        return self._thread_page(in_resource, limit, offset, after, since)

    def _newest_page(
        self, threads: list[Thread], limit: int, offset: int, after: str | None, before: int | None
    ) -> ThreadPage:
        """A page of ``threads`` most recently active first (activity descending, unique)."""
        activity = self._thread_activity
        if after is not None:
            if after not in activity:
                raise ThreadNotFoundError(after)
            threads = [t for t in threads if activity[t.id] < activity[after]]
        if before is not None:
            threads = [t for t in threads if activity[t.id] < before]
        page = _page(sorted(threads, key=lambda t: activity[t.id], reverse=True), limit, offset)
        return ThreadPage([_copy(t) for t in page], [str(activity[t.id]) for t in page])

    async def list_all_threads(
        self, *, limit: int = 100, offset: int = 0, after: str | None = None, since: datetime | None = None
    ) -> list[Thread]:
        self._open()
        return self._thread_page(list(self._threads.values()), limit, offset, after, since)

    def _thread_page(
        self, threads: list[Thread], limit: int, offset: int, after: str | None, since: datetime | None
    ) -> list[Thread]:
        """A page of ``threads`` in the listing order (created_at, then insertion order), starting
        after the thread ``after`` when given, and at ``since`` (a created_at) when given."""
        _page([], limit, offset)  # refuses a negative limit or offset before anything else

        def key(thread: Thread) -> tuple[datetime, int]:
            return thread.created_at, self._thread_order[thread.id]

        if after is not None:
            cursor = self._threads.get(after)
            if cursor is None:
                raise ThreadNotFoundError(after)
            threads = [t for t in threads if key(t) > key(cursor)]
        if since is not None:
            threads = [t for t in threads if t.created_at >= since]
        return [_copy(t) for t in _page(sorted(threads, key=key), limit, offset)]

    async def update_thread(self, thread: Thread, *, expected_version: int) -> Thread | None:
        self._open()
        check_storable(thread)
        stored = self._threads.get(thread.id)
        if stored is None or stored.version != expected_version:
            return None
        if thread.resource_id != stored.resource_id:
            raise InvalidInputError(
                f"Thread '{thread.id}' belongs to resource '{stored.resource_id}'; "
                "a thread cannot move to another resource."
            )
        updated = thread.model_copy(
            update={"version": expected_version + 1, "created_at": stored.created_at}, deep=True
        )
        self._threads[thread.id] = updated
        return _copy(updated)

    async def delete_thread(self, thread_id: str) -> bool:
        self._open()
        if self._threads.pop(thread_id, None) is None:
            return False
        del self._thread_order[thread_id]
        del self._thread_activity[thread_id]
        for message_id in self._thread_messages.pop(thread_id, []):
            del self._messages[message_id]
        self._forgotten.pop(thread_id, None)
        self._delete_lineage(lineage_key("thread", thread_id, ""))
        return True

    async def note_forgotten_ids(self, thread_id: str, ids: list[str]) -> None:
        """Keep ``ids`` as forgotten message ids of the thread, every one (see
        :func:`~obsmem.storage.contract.note_forgotten_ids`)."""
        self._open()
        self._thread(thread_id)
        self._forgotten.setdefault(thread_id, set()).update(ids)

    async def list_forgotten_ids(self, thread_id: str) -> list[str]:
        """Every forgotten message id of the thread, in no particular order."""
        self._open()
        return list(self._forgotten.get(thread_id, ()))

    async def forgotten_among(self, thread_id: str, ids: list[str]) -> frozenset[str]:
        """Which of ``ids`` the thread's forgotten message ids hold."""
        self._open()
        kept = self._forgotten.get(thread_id, set())
        return frozenset(i for i in ids if i in kept)

    def _thread(self, thread_id: str) -> Thread:
        thread = self._threads.get(thread_id)
        if thread is None:
            raise ThreadNotFoundError(thread_id)
        return thread

    # -- messages --------------------------------------------------------------------------------
    async def save_messages(
        self, thread_id: str, messages: list[Message], *, after_seq: int | None = None
    ) -> list[Message]:
        self._open()
        thread = self._thread(thread_id)
        check_storable(messages=messages)
        forgotten = frozenset() if saves_forgotten() else forgotten_ids(thread)  # a forget's: not stored again
        if len(forgotten) >= MAX_FORGOTTEN_IDS:  # the row's list is full: every id is in the table
            forgotten = forgotten | self._forgotten.get(thread_id, set()).intersection(m.id for m in messages)
        messages = [m for m in messages if m.id not in forgotten] if forgotten else messages
        # A reply's receipt names no thread deleted while it was made (see rules.without_receipt_threads).
        named = {t for m in messages for t in receipt_threads(m.metadata)} - {thread_id}
        messages = without_receipt_threads(messages, {t for t in named if t not in self._threads})
        if after_seq is not None:  # the ordering guard: a newer message that calls or answers a tool
            for message_id in reversed(self._thread_messages[thread_id]):
                newer = self._messages[message_id]
                if _seq(newer) <= after_seq:
                    break
                if newer.tool_calls or newer.tool_results:
                    raise ThreadChangedError(thread_id, after_seq, _seq(newer))
        for message in messages:  # validate the whole batch before writing any of it
            check_message_owner(message, thread)
            existing = self._messages.get(message.id)
            if existing is not None and existing.thread_id != thread_id:
                raise InvalidInputError(
                    f"Message '{message.id}' already belongs to another thread; "
                    f"it cannot also be saved into thread '{thread_id}'. Give it a new id."
                )
        for message in messages:
            existing = self._messages.get(message.id)
            if existing is None:
                stored = message.model_copy(
                    update={
                        "seq": next(self._seq),
                        "thread_id": thread_id,
                        "resource_id": thread.resource_id,
                    },
                    deep=True,
                )
                self._thread_messages[thread_id].append(message.id)
                self._thread_activity[thread_id] = next(self._activity)
            else:
                stored = existing.model_copy(
                    update={"role": message.role, "parts": message.parts, "metadata": message.metadata},
                    deep=True,
                )
            self._messages[message.id] = long_texts(stored)  # its copies carry the long texts' digests
        return [_copy(self._messages[m.id]) for m in messages]

    async def list_messages(
        self,
        thread_id: str,
        *,
        after_seq: int = 0,
        before_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        self._open()
        self._thread(thread_id)
        found = [
            m
            for m in (self._messages[i] for i in self._thread_messages[thread_id])
            if _seq(m) > after_seq and (before_seq is None or _seq(m) < before_seq)
        ]
        if newest_first:
            found.reverse()
        return [_copy(m) for m in _page(found, limit, 0)]

    async def list_resource_messages(self, resource_id: str, *, after_seq: int = 0) -> list[Message]:
        self._open()
        found = [m for m in self._messages.values() if m.resource_id == resource_id and _seq(m) > after_seq]
        return [_copy(m) for m in sorted(found, key=_seq)]

    async def list_resource_messages_after(
        self, resource_id: str, cursors: Mapping[str, int], *, exclude_thread_id: str | None = None
    ) -> list[Message]:
        self._open()
        found: list[Message] = []
        for thread_id, thread in self._threads.items():
            if thread.resource_id != resource_id or thread_id == exclude_thread_id:
                continue
            cursor = cursors.get(thread_id, 0)
            ids = self._thread_messages.get(thread_id, [])
            start = len(ids)  # ids are in seq order: walk back over the newer ones only
            while start > 0 and _seq(self._messages[ids[start - 1]]) > cursor:
                start -= 1
            found.extend(self._messages[i] for i in ids[start:])
        return [_copy(m) for m in sorted(found, key=_seq)]

    async def get_messages(self, message_ids: list[str]) -> list[Message]:
        self._open()
        found = {i: self._messages[i] for i in message_ids if i in self._messages}
        return [_copy(m) for m in sorted(found.values(), key=_seq)]

    async def add_message_parts(self, message_id: str, parts: list[DataPart]) -> Message:
        self._open()
        stored = self._messages.get(message_id)
        if stored is None:
            raise MessageNotFoundError(message_id)
        merged = merge_parts(stored.parts, parts)
        if len(merged) != len(stored.parts):
            stored = stored.model_copy(update={"parts": merged}, deep=True)
            self._messages[message_id] = stored
        return _copy(stored)

    async def rewrite_message(self, message: Message, *, expected: Message) -> bool:
        """:func:`~obsmem.storage.contract.rewrite_message_if_unchanged`, compare-and-set."""
        self._open()
        stored = self._messages.get(message.id)
        if stored is None or stored.thread_id is None or not same_message(stored, expected):
            return False
        with rewriting():
            await self.save_messages(stored.thread_id, [message])  # (no await inside: nothing runs between)
        return True

    async def delete_messages(self, message_ids: list[str]) -> int:
        self._open()
        gone = 0
        for message_id in dict.fromkeys(message_ids):
            message = self._messages.pop(message_id, None)
            if message is None:
                continue
            gone += 1
            if message.thread_id in self._thread_messages:
                self._thread_messages[message.thread_id].remove(message_id)
        return gone

    async def count_messages(self, thread_id: str) -> int:
        self._open()
        self._thread(thread_id)
        return len(self._thread_messages[thread_id])

    # -- observation records -----------------------------------------------------------------------
    def _head(self, lineage: str) -> ObservationRecord | None:
        for record_id in self._lineages.get(lineage, ()):
            record = self._records[record_id]
            if record.is_live:
                return record
        return None

    def _gone(self, record: ObservationRecord) -> bool:
        return record.scope == "thread" and record.thread_id not in self._threads

    def _deleted(self, thread_ids: list[str]) -> set[str]:
        return {tid for tid in thread_ids if tid not in self._threads}

    def _adds_for_deleted_thread(self, stored: ObservationRecord | None, record: ObservationRecord) -> bool:
        return any(tid not in self._threads for tid in advanced_threads(stored, record))

    def _stale(self, lineage: str) -> WriteResult:
        head = self._head(lineage)
        return WriteResult(status="stale", record=_copy(head) if head else None)

    def _insert_record(self, record: ObservationRecord) -> None:
        if record.id in self._records:
            raise InvalidInputError(
                f"Observation record id '{record.id}' is already used; ids are never reused."
            )
        self._records[record.id] = record
        self._record_order[record.id] = next(self._order)
        self._lineages.setdefault(record.lineage, []).append(record.id)

    async def get_head(self, lineage: str) -> ObservationRecord | None:
        self._open()
        head = self._head(lineage)
        return _copy(head) if head else None

    async def read_window(self, lineage: str, thread_id: str) -> tuple[ObservationRecord | None, list[Message]]:
        """:func:`~obsmem.storage.contract.read_window` with no await between its two reads (one
        snapshot: nothing else runs on the event loop meanwhile)."""
        self._open()
        self._thread(thread_id)
        head = self._head(lineage)
        after = head.cursor(thread_id) if head else 0
        messages = [
            _copy(m) for m in (self._messages[i] for i in self._thread_messages[thread_id]) if _seq(m) > after
        ]
        return (_copy(head) if head else None), messages

    async def get_record(self, record_id: str) -> ObservationRecord | None:
        self._open()
        record = self._records.get(record_id)
        return _copy(record) if record else None

    async def list_generations(
        self, lineage: str, *, limit: int = 100, offset: int = 0
    ) -> list[ObservationRecord]:
        self._open()
        records = sorted(
            (self._records[i] for i in self._lineages.get(lineage, ())),
            key=lambda r: (r.generation, self._record_order[r.id]),
            reverse=True,
        )
        return [_copy(r) for r in _page(records, limit, offset)]

    async def create_record(self, record: ObservationRecord) -> WriteResult:
        self._open()
        check_lineage(record)
        if self._gone(record) or self._adds_for_deleted_thread(None, record):
            return WriteResult(status="gone", record=None)
        if self._head(record.lineage) is not None:
            return self._stale(record.lineage)
        stored = record.model_copy(update={"superseded_by": None}, deep=True)
        self._insert_record(stored)
        return WriteResult(status="applied", record=_copy(stored))

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        self._open()
        stored = self._records.get(record.id)
        if stored is None or self._gone(stored) or self._adds_for_deleted_thread(stored, record):
            return WriteResult(status="gone", record=None)
        check_same_identity(stored, record)
        if not stored.is_live or stored.version != expected_version:
            return self._stale(stored.lineage)
        check_cursors_forward(stored, record, gone=self._deleted(removed_threads(stored, record)))
        updated = record.model_copy(
            update={"version": expected_version + 1, "superseded_by": None, "created_at": stored.created_at},
            deep=True,
        )
        self._records[record.id] = updated
        return WriteResult(status="applied", record=_copy(updated))

    async def create_generation(
        self, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int
    ) -> WriteResult:
        self._open()
        check_successor(current, successor)
        stored = self._records.get(current.id)
        if stored is None or self._gone(stored) or self._adds_for_deleted_thread(stored, successor):
            return WriteResult(status="gone", record=None)
        if stored.lineage != current.lineage:
            raise InvalidInputError(f"Record '{current.id}' belongs to lineage '{stored.lineage}'.")
        if not stored.is_live or stored.version != expected_version:
            return self._stale(stored.lineage)
        check_cursors_forward(stored, successor, gone=self._deleted(removed_threads(stored, successor)))
        if successor.id in self._records:
            raise InvalidInputError(f"Observation record id '{successor.id}' is already used.")
        new_head = successor.model_copy(
            update={"generation": stored.generation + 1, "version": 1, "superseded_by": None}, deep=True
        )
        self._records[stored.id] = stored.model_copy(
            update={"superseded_by": new_head.id, "version": stored.version + 1}
        )
        self._insert_record(new_head)
        return WriteResult(status="applied", record=_copy(new_head))

    async def delete_lineage(self, lineage: str) -> int:
        self._open()
        return self._delete_lineage(lineage)

    async def rewrite_generation(
        self, record: ObservationRecord, *, expected: ObservationRecord | None = None
    ) -> bool:
        self._open()
        stored = self._records.get(record.id)
        if stored is None or stored.is_live or (expected is not None and not same_record(stored, expected)):
            return False
        self._records[record.id] = rewritten_generation(stored, record)
        return True

    def _delete_lineage(self, lineage: str) -> int:
        ids = self._lineages.pop(lineage, [])
        for record_id in ids:
            del self._records[record_id]
            del self._record_order[record_id]
        return len(ids)

    # -- leases ------------------------------------------------------------------------------------
    # Models are frozen and hold only immutable values, so leases need no defensive copies.
    async def acquire_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        self._open()
        expires_at = lease_expiry(key, owner, ttl_s, now)
        stored = self._leases.get(key)
        lease = acquired_lease(stored, key, owner, now, expires_at, lambda: next(self._lease_tokens))
        if lease is not None:
            self._leases[key] = lease
            if stored is None or stored.token != lease.token:  # a new acquisition: purge
                cutoff = lease_purge_before(now)
                stale = [k for k, held in self._leases.items() if k != key and held.expires_at <= cutoff]
                for gone in stale[:LEASE_PURGE_BATCH]:
                    del self._leases[gone]
        return lease

    async def renew_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        self._open()
        expires_at = lease_expiry(key, owner, ttl_s, now)
        lease = renewed_lease(self._leases.get(key), owner, now, expires_at)
        if lease is not None:
            self._leases[key] = lease
        return lease

    async def release_lease(self, key: str, owner: str) -> bool:
        self._open()
        stored = self._leases.get(key)
        if stored is None or stored.owner != owner:
            return False
        del self._leases[key]
        return True

    async def get_lease(self, key: str) -> Lease | None:
        self._open()
        return self._leases.get(key)

    async def list_leases(self, prefix: str = "") -> list[Lease]:
        self._open()
        return [self._leases[k] for k in sorted(self._leases) if k.startswith(prefix)]

    async def lease_page(self, prefix: str = "", *, limit: int, after_key: str | None = None) -> list[Lease]:
        """:func:`~obsmem.storage.contract.lease_page`."""
        self._open()
        check_page_limit(limit)
        keys = (k for k in self._leases if k.startswith(prefix) and (after_key is None or k > after_key))
        return [self._leases[k] for k in heapq.nsmallest(limit, keys)]

    async def count_leases(self, prefix: str = "", *, now: datetime) -> LeaseCounts:
        """:func:`~obsmem.storage.contract.count_leases`."""
        self._open()
        return lease_counts_of([lease for k, lease in self._leases.items() if k.startswith(prefix)], now)

    # -- working memory ----------------------------------------------------------------------------
    async def get_working_memory(self, key: str) -> str | None:
        self._open()
        return self._working_memory.get(key)

    async def set_working_memory(self, key: str, text: str) -> None:
        self._open()
        self._working_memory[key] = text

    async def replace_working_memory(self, key: str, text: str | None, *, expected: str) -> bool:
        """:func:`~obsmem.storage.contract.replace_working_memory_if_unchanged`, compare-and-set."""
        self._open()
        if self._working_memory.get(key) != expected:
            return False
        if text is None:
            del self._working_memory[key]
        else:
            self._working_memory[key] = text
        return True

    async def delete_working_memory(self, key: str) -> bool:
        self._open()
        return self._working_memory.pop(key, None) is not None

    # -- work queue --------------------------------------------------------------------------------
    def _waiting(self, kind: str, target: str) -> WorkItem | None:
        return next(
            (w for w in self._work.values() if w.kind == kind and w.target == target and w.claimed_by is None),
            None,
        )

    async def enqueue_work(
        self, kind: str, target: str, *, now: datetime, payload: dict[str, Any] | None = None,
        delay_s: float = 0.0,
    ) -> WorkItem:
        self._open()
        available_at = work_available_at(kind, target, now, delay_s)
        waiting = self._waiting(kind, target)
        if waiting is not None:
            merged = waiting.model_copy(
                update={
                    "available_at": min(waiting.available_at, available_at),
                    "payload": dict(payload) if payload is not None else waiting.payload,
                },
                deep=True,
            )
            self._work[merged.id] = merged
            return _copy(merged)
        item = WorkItem(
            id=next(self._work_ids), kind=kind, target=target, payload=dict(payload or {}),
            enqueued_at=now, available_at=available_at,
        )
        self._work[item.id] = _copy(item)
        return item

    async def claim_work(
        self, owner: str, *, ttl_s: float, now: datetime, kinds: tuple[str, ...] | None = None, limit: int = 1
    ) -> list[WorkItem]:
        self._open()
        expires_at = claim_expiry(owner, ttl_s, now)
        check_limit(limit)
        claimed: list[WorkItem] = []
        for item_id in sorted(self._work):
            item = self._work[item_id]
            if len(claimed) >= limit:
                break
            if (kinds is not None and item.kind not in kinds) or not is_claimable(item, now):
                continue
            taken = item.model_copy(
                update={"claimed_by": owner, "claim_token": next(self._claim_tokens),
                        "claim_expires_at": expires_at, "attempts": item.attempts + 1}
            )
            self._work[item_id] = taken
            claimed.append(_copy(taken))
        return claimed

    async def renew_work(self, item: WorkItem, *, ttl_s: float, now: datetime) -> WorkItem | None:
        self._open()
        expires_at = claim_expiry(item.claimed_by or "", ttl_s, now)
        stored = self._work.get(item.id)
        if stored is None or not holds_claim(stored, item) or stored.claim_expired(now):
            return None
        renewed = stored.model_copy(update={"claim_expires_at": expires_at})
        self._work[item.id] = renewed
        return _copy(renewed)

    async def complete_work(self, item: WorkItem) -> bool:
        self._open()
        stored = self._work.get(item.id)
        if stored is None or not holds_claim(stored, item):
            return False
        del self._work[item.id]
        return True

    async def release_work(
        self, item: WorkItem, *, now: datetime, delay_s: float = 0.0, error: str | None = None,
        count_attempt: bool = True,
    ) -> bool:
        self._open()
        available_at = work_available_at(item.kind, item.target, now, delay_s)
        stored = self._work.get(item.id)
        if stored is None or not holds_claim(stored, item):
            return False
        attempts, last_error = released_attempts(stored, error, count_attempt)
        del self._work[item.id]
        waiting = self._waiting(stored.kind, stored.target)
        if waiting is not None:  # coalesce: one waiting item per (kind, target)
            self._work[waiting.id] = waiting.model_copy(
                update={"available_at": min(waiting.available_at, available_at),
                        "attempts": max(waiting.attempts, attempts), "last_error": last_error}
            )
            return True
        self._work[item.id] = stored.model_copy(
            update={"claimed_by": None, "claim_token": None, "claim_expires_at": None,
                    "available_at": available_at, "attempts": attempts, "last_error": last_error}
        )
        return True

    async def wake_work(self, kind: str, target: str, *, now: datetime) -> bool:
        self._open()
        now = work_available_at(kind, target, now, 0.0)  # checks the arguments
        waiting = self._waiting(kind, target)
        if waiting is None or waiting.available_at <= now:
            return False
        self._work[waiting.id] = waiting.model_copy(update={"available_at": now})
        return True

    async def bury_work(self, item: WorkItem, *, now: datetime, error: str | None = None) -> bool:
        self._open()
        stored = self._work.get(item.id)
        if stored is None or not holds_claim(stored, item):
            return False
        self._dead[item.id] = buried_work(stored, now, error)
        del self._work[item.id]
        return True

    async def list_dead_work(self, kind: str | None = None) -> list[DeadWork]:
        self._open()
        return [self._dead[i] for i in sorted(self._dead) if kind is None or self._dead[i].kind == kind]

    async def dead_work_page(self, *, limit: int, before_id: int | None = None) -> list[DeadWork]:
        """:func:`~obsmem.storage.contract.dead_work_page`."""
        self._open()
        check_page_limit(limit)
        ids = heapq.nlargest(limit, (i for i in self._dead if before_id is None or i < before_id))
        return [_copy(self._dead[i]) for i in ids]

    async def count_dead_work(self) -> int:
        """:func:`~obsmem.storage.contract.count_dead_work`."""
        self._open()
        return len(self._dead)

    async def retry_dead_work(self, dead_id: int, *, now: datetime) -> WorkItem | None:
        self._open()
        dead = self._dead.get(dead_id)
        if dead is None:
            return None
        item = await self.enqueue_work(dead.kind, dead.target, now=now, payload=dict(dead.payload))
        del self._dead[dead_id]
        return item

    async def list_work(self, kind: str | None = None) -> list[WorkItem]:
        self._open()
        return [_copy(self._work[i]) for i in sorted(self._work) if kind is None or self._work[i].kind == kind]

    async def count_work(self, *, now: datetime) -> list[WorkCounts]:
        """:func:`~obsmem.storage.contract.count_work` (no item copied)."""
        self._open()
        return work_counts_of(list(self._work.values()), now)

    async def has_work(self, kind: str) -> bool:
        """:func:`~obsmem.storage.contract.has_work`."""
        self._open()
        return any(item.kind == kind for item in self._work.values())

    async def delete_work(self, target: str) -> int:
        self._open()
        ids = [i for i, item in self._work.items() if item.target == target]
        for item_id in ids:
            del self._work[item_id]
        for dead_id in [i for i, dead in self._dead.items() if dead.target == target]:
            del self._dead[dead_id]
        return len(ids)

    # -- cost ledger --------------------------------------------------------------------------
    async def record_model_calls(self, calls: Sequence[ModelCall]) -> int:
        self._open()
        self._model_calls.extend(calls)
        return len(calls)

    async def usage_rows(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageRow]:
        self._open()
        check_window(since, until)
        return sum_calls(
            c for c in self._model_calls if matches(c, thread_id, resource_id, since, until)
        )

    async def delete_model_calls(self, *, thread_id: str | None = None, resource_id: str | None = None) -> int:
        self._open()
        check_target(thread_id, resource_id)
        kept = [
            c for c in self._model_calls
            if not ((thread_id is not None and c.thread_id == thread_id)
                    or (resource_id is not None and c.resource_id == resource_id))
        ]
        gone = len(self._model_calls) - len(kept)
        self._model_calls = kept
        return gone

    async def section_messages_page(self, thread_id: str, *, after_seq: int = 0, limit: int) -> list[Message]:
        """:func:`~obsmem.storage.contract.section_messages`: the thread's first ``limit`` messages
        after ``after_seq`` that may hold a section tag, by seq (:meth:`_holding_page`)."""
        return self._holding_page(thread_id, may_hold_sections, after_seq, limit)

    async def metadata_messages_page(
        self, thread_id: str, *, needle: str, after_seq: int = 0, limit: int
    ) -> list[Message]:
        """:func:`~obsmem.storage.contract.metadata_messages`: the thread's first ``limit``
        messages after ``after_seq`` whose metadata, as JSON, holds ``needle``, by seq
        (:meth:`_holding_page`)."""
        return self._holding_page(
            thread_id, lambda m: bool(m.metadata) and needle in json.dumps(m.metadata, default=str), after_seq, limit
        )

    def _holding_page(
        self, thread_id: str, holds: Callable[[Message], bool], after_seq: int, limit: int
    ) -> list[Message]:
        """The thread's first ``limit`` messages after ``after_seq`` that ``holds``, by seq (from
        ``after_seq`` on, found by bisection), copied. Unknown thread → ThreadNotFoundError."""
        self._open()
        check_page_limit(limit)
        self._thread(thread_id)
        ids = self._thread_messages[thread_id]
        start = bisect.bisect_right(ids, after_seq, key=lambda i: _seq(self._messages[i]))
        found: list[Message] = []
        for message_id in ids[start:]:
            message = self._messages[message_id]
            if holds(message):
                found.append(_copy(message))
                if len(found) == limit:
                    break
        return found

    async def resource_orgs(self, resource_id: str) -> list[str | None]:
        """:func:`~obsmem.storage.contract.resource_orgs`: the distinct orgs of the resource's
        threads (no thread copied)."""
        self._open()
        return list({t.org_id for t in self._threads.values() if t.resource_id == resource_id})

    async def resource_totals(self, resource_id: str, *, scope: str) -> tuple[int, int, int]:
        """:func:`~obsmem.storage.contract.resource_totals`: counted here, nothing copied."""
        self._open()
        threads = [t.id for t in self._threads.values() if t.resource_id == resource_id]
        messages = sum(len(self._thread_messages.get(t, ())) for t in threads)
        if scope == "thread":
            heads = [self._head(lineage_key("thread", t, resource_id)) for t in threads]
        else:
            heads = [self._head(lineage_key("resource", None, resource_id))] if threads else []
        return len(threads), messages, sum(h.total_tokens_observed for h in heads if h is not None)


def _seq(message: Message) -> int:
    assert message.seq is not None  # every stored message has one
    return message.seq
