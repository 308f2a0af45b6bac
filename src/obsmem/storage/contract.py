"""The storage contract every obsmem adapter implements.

Concurrency safety lives here, not in process-local locks: several engines, in one process or
many, may share a store, and the only things they can rely on are these guarantees.

Guarantees (tested once, in ``tests/conformance``, against every adapter):

* **Versioned rows.** Every thread and observation record carries ``version``. A write names
  the version it read; if the stored row moved on, the write is *not applied* and the caller
  gets :class:`WriteResult` with ``status="stale"`` and the current row. A stale write never
  overwrites anything. Staleness is a result, not an exception.
* **Generations.** An observation *lineage* (``thread:<id>`` or ``resource:<id>``) is a chain
  of records; the newest live one (``superseded_by is None``) is the *head*. A reflection
  creates a successor atomically: the old head is retired in the same transaction that inserts
  the new one, so there is never zero or two heads. Older generations stay listable.
* **Cursors never move backward.** A record's per-thread cursor is the ``seq`` of the last
  observed message. An update that would lower any cursor is refused with
  :class:`~obsmem.errors.StorageError`; it is a bug in the caller, never a race (a race shows
  up as ``stale``). One exception: a thread that no longer exists (checked in the write's
  transaction) may be left out of a record whole, so deleting a thread takes its id out of the
  resource's record (seqs are never reused; a write adding to a deleted thread is ``gone``).
* **Messages are never lost or duplicated.** ``save_messages`` is idempotent by message id:
  saving the same id again updates its parts in place and keeps its ``seq``. The store assigns
  ``seq`` from one monotonically increasing counter, so insertion order is total.
* **Ordering guard.** ``save_messages(..., after_seq=N)`` saves only while no message of the
  thread newer than ``N`` calls or answers a tool, checked in the save's transaction; else it
  raises :class:`~obsmem.errors.ThreadChangedError` and saves nothing (the one stale outcome that
  is an exception: the save's result is its messages). Turns save this way, so two turns of one
  thread (in one process or many) never put a message between a tool call and its result.
  Newer messages without tool parts do not count: the place of a batch checked against the
  thread before them is still right after them (no call can wait across such a message, since
  its own save closed or was refused by any call waiting before it), so turns writing plain
  messages never hold each other up.
* **Write guard.** Once a thread is deleted, writes to its observation records report
  ``status="gone"``; nothing is resurrected. In resource scope, a write that adds observations
  for a deleted thread (moves its cursor forward or adds a buffered chunk of it) reports
  ``gone`` too, so an observation in flight for a deleted thread never reaches the shared record.
* **Forgetting.** ``delete_messages``, ``rewrite_generation`` (a retired generation's content,
  in place), ``delete_working_memory`` and ``delete_work`` let ``Memory.forget`` and
  ``Memory.delete_resource`` remove data everywhere it is stored, older generations included.
  Erasers in several processes rewrite what they read, so each rewrite is a compare-and-set on
  the content read (these rows carry no version that moves): ``rewrite_generation(record,
  expected=<the generation as read>)``, ``rewrite_message(message, expected=)`` and
  ``replace_working_memory(key, text, expected=)`` write only while the stored row is still
  what the caller read, and answer False otherwise (the caller reads again and redoes its
  change). The last two are optional native methods (:func:`rewrite_message_if_unchanged`,
  :func:`replace_working_memory_if_unchanged` read and compare just before a blind write on a
  store without them), as is ``expected=`` (:func:`rewrite_generation_if_unchanged`).
  ``Memory.delete_thread`` reads of the user's other threads only the messages whose markers
  may quote its ``<thread id>`` sections (:func:`section_messages`; optional native method
  ``section_messages_page(thread_id, after_seq=, limit=)``, a store without it is read a page of
  ``list_messages`` at a time), and, to take the deleted thread's id out of their replies'
  receipts, only those whose metadata holds it (:func:`metadata_messages`; optional native
  method ``metadata_messages_page(thread_id, needle=, after_seq=, limit=)``). The ids of the
  messages a forget changed are kept on the thread's row (the newest :data:`MAX_FORGOTTEN_IDS`)
  and, with the optional native methods ``note_forgotten_ids(thread_id, ids)``,
  ``forgotten_among(thread_id, ids)`` and ``list_forgotten_ids(thread_id)``, every one in a table
  that goes with the thread (:func:`note_forgotten_ids`, :func:`every_forgotten_id`).
* **Newest first.** ``list_threads(resource_id, newest_first=True)`` lists a resource's threads
  most recently active first from an index: a thread's activity is drawn from a store-wide
  counter when it is created and again, in the save's transaction, whenever a message is
  inserted into it. Pages go on from a :class:`ThreadPage`'s ``next_before`` (a position, not a
  thread), so within one pass every thread whose activity did not change shows exactly once, and
  one that got a message moves to the top (not shown again in that pass, nor later in it). An
  optional keyword: :func:`newest_threads` reads a store without it whole.
* **Who holds a resource.** :func:`resource_orgs` answers the distinct org ids of a resource's
  threads without handing out its thread rows (optional native method
  ``resource_orgs(resource_id)``, a ``SELECT DISTINCT`` in SQL; a store without it is read a
  page of ``list_threads`` at a time, bounded memory).
* **What a resource holds, in numbers.** :func:`resource_totals` answers a resource's thread
  count, message count and the tokens its live observation records have observed, without
  handing out a thread, message or record (optional native method
  ``resource_totals(resource_id, scope=)``, aggregates in SQL; a store without it is read a page
  of ``list_threads`` at a time, each thread's messages counted and head read, bounded memory).
* **Leases.** A lease says "this owner is doing the background work for this key; do not
  start the same work". It lives in the store, so it is seen by every engine sharing the store
  (in any process) and it survives a crash of its holder: it simply expires. Acquiring is
  atomic across processes, so of many owners racing for a free key exactly one gets it. Every
  acquisition that is not a renewal gets a *fencing token* higher than any token the store has
  handed out before (for any key, even after a release), so a newer holder can always be told
  from an older one. Leases are a way to avoid duplicate work, not the source of correctness:
  writes stay compare-and-set, and a holder that loses its lease must expect ``stale``.

  Time is the caller's: every lease method that needs "now" takes it as an argument (the
  engine's injectable clock), and the store never reads its own clock. All engines sharing a
  store must therefore pass comparable clocks: timezone-aware wall-clock time (UTC), kept in
  sync across machines well within the lease TTLs in use.
* **A work queue.** Background work (buffering, reflection) can be handed to worker processes
  through the store: ``enqueue_work`` adds a :class:`WorkItem` (at most one *waiting* item per
  ``(kind, target)``: enqueueing again coalesces into it), ``claim_work`` hands each waiting item
  to exactly one claimer with a fencing ``claim_token`` and an expiry, and a claim that expires
  (its worker crashed or stalled) makes the item claimable again. ``complete_work`` removes it,
  ``release_work`` puts it back to wait (after a failure, or until another owner's lease
  expires), and ``wake_work`` makes a waiting item due at once (the lease it waited for was
  released). As with leases, the store never reads a clock: ``now`` is the caller's. The
  queue is read in bounded amounts with :func:`count_work`, :func:`has_work`,
  :func:`dead_work_page`, :func:`count_dead_work`, :func:`lease_page` and :func:`count_leases`
  (optional native methods, counted or paged in the store; a store without them is read whole).
* **A cost ledger.** ``record_model_calls`` appends one row per memory model call (a
  :class:`~obsmem.calls.ModelCall`: role, model, token counts, latency, outcome, the thread and
  resource ids; never any text). ``usage_rows`` sums them per UTC day, role and model in the
  store (SQL ``GROUP BY`` where there is SQL), filtered by thread, resource and a time window;
  ``delete_model_calls`` removes a thread's or a resource's rows (deleting data deletes them).
* **Seq is commit order within a thread.** ``seq`` values are unique store-wide and increase;
  within one thread a message that commits later always has a higher ``seq`` (adapters whose
  writers run concurrently serialise the writers of one thread), so a reader that saw ``seq = n``
  will never later find a new message of that thread below ``n``.
"""

from __future__ import annotations

import asyncio
import json
import inspect
import re
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Final, Literal, NamedTuple, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from obsmem.calls import ModelCall, UsageRow
from obsmem.errors import InvalidInputError, ThreadChangedError, ThreadNotFoundError
from obsmem.types import DataPart, Message, Thread, utcnow

__all__ = [
    "BufferedChunk",
    "BufferedReflection",
    "ClosingContext",
    "DeadWork",
    "LEASE_PURGE_AFTER_S",
    "LEASE_PURGE_BATCH",
    "Lease",
    "LeaseCounts",
    "ObservationRecord",
    "Store",
    "ThreadState",
    "WorkCounts",
    "WorkItem",
    "WindowMark",
    "WriteResult",
    "add_parts_marked",
    "check_page_limit",
    "count_dead_work",
    "count_leases",
    "count_work",
    "dead_work_page",
    "has_work",
    "lease_counts_of",
    "lease_page",
    "may_hold_sections",
    "newest_threads",
    "resource_orgs",
    "resource_totals",
    "ThreadPage",
    "ResourceTotals",
    "section_messages",
    "SECTION_NEEDLE",
    "json_needle",
    "metadata_messages",
    "work_counts_of",
    "create_generation_marking",
    "committed",
    "forget_cached",
    "replace_working_memory_if_unchanged",
    "rewrite_generation_if_unchanged",
    "rewrite_message_by_save",
    "rewrite_message_if_unchanged",
    "rewriting",
    "saves_forgotten",
    "MAX_FORGOTTEN_IDS",
    "note_forgotten_ids",
    "forgotten_among",
    "every_forgotten_id",
    "same_message",
    "same_record",
    "lineage_key",
    "read_marked_window",
    "read_window",
    "save_marked",
    "save_marked_early",
    "window_mark",
]


def lineage_key(scope: Literal["thread", "resource"], thread_id: str | None, resource_id: str) -> str:
    if scope == "thread":
        if not thread_id:
            raise ValueError("thread scope needs a thread id")
        return f"thread:{thread_id}"
    return f"resource:{resource_id}"


class ThreadState(BaseModel):
    """What the engine keeps per thread inside a record (one entry in thread scope)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cursor: int = 0  # seq of the last observed message of this thread; 0 = nothing observed
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted: dict[str, Any] = Field(default_factory=dict)


class BufferedChunk(BaseModel):
    """An observation made early and stored inactive, with the exact messages it covers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    cycle_id: str
    thread_id: str
    observations: str
    observation_tokens: int
    message_ids: tuple[str, ...]
    message_tokens: int
    first_seq: int
    last_seq: int
    created_at: datetime = Field(default_factory=utcnow)
    extracted: dict[str, Any] = Field(default_factory=dict)
    #: The continuation hints the buffer's observer wrote for the moment of ``last_seq``
    #: (None: it wrote none); activation makes the newest chunk's hints the thread's.
    current_task: str | None = None
    suggested_response: str | None = None


class BufferedReflection(BaseModel):
    """A reflection made early over the first ``line_count`` lines of the active text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cycle_id: str
    text: str
    tokens: int
    input_tokens: int
    line_count: int
    created_at: datetime = Field(default_factory=utcnow)


class ObservationRecord(BaseModel):
    """One generation of a lineage's observational memory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    lineage: str
    scope: Literal["thread", "resource"]
    thread_id: str | None
    resource_id: str
    generation: int = 0
    origin: Literal["initial", "reflection"] = "initial"
    version: int = 1
    superseded_by: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    active_observations: str = ""
    observation_tokens: int = 0
    total_tokens_observed: int = 0
    pending_message_tokens: int = 0
    threads: dict[str, ThreadState] = Field(default_factory=dict)

    buffered_chunks: tuple[BufferedChunk, ...] = ()
    buffered_reflection: BufferedReflection | None = None
    # Observation-token count at which reflection produced no improvement; reflecting the
    # same input again cannot compress better, so it is skipped until the count changes.
    reflection_suppressed_at: int | None = None
    # Pending-token count at which the last observation buffer was triggered: the next buffer
    # starts once the pending count passes this boundary plus the bufferTokens interval.
    buffer_boundary_tokens: int = 0
    # The same idea for buffered reflection, counted in observation tokens.
    reflection_boundary_tokens: int = 0

    config: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def cursor(self, thread_id: str) -> int:
        state = self.threads.get(thread_id)
        return state.cursor if state else 0

    @property
    def is_live(self) -> bool:
        return self.superseded_by is None


class Lease(BaseModel):
    """A time-limited claim by ``owner`` on ``key`` (e.g. ``obs:thread:t1``).

    ``token`` is the fencing token: it stays the same while the holder renews, and a new
    acquisition (another owner, or anyone after expiry or release) gets a higher one. The lease
    is held while ``now < expires_at``; at ``expires_at`` it is expired and free to take.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    owner: str
    token: int
    acquired_at: datetime
    expires_at: datetime

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at <= now


#: A lease expired at least this long ago (by an acquirer's clock) is deleted by the next new
#: acquisition of another key (:meth:`Store.acquire_lease`), :data:`LEASE_PURGE_BATCH` rows at
#: most each: a key taken once and never released (a REST turn its client left, a process killed
#: while holding one) does not keep its row for ever. Long after any TTL obsmem uses, so no clock
#: disagreement between processes takes a lease its holder still thinks is held, and a holder
#: that finds its lease just expired may still release it.
LEASE_PURGE_AFTER_S = 3600.0
LEASE_PURGE_BATCH = 100


def lease_purge_before(now: datetime) -> datetime:
    """Leases with ``expires_at`` at or before this are purged by an acquisition at ``now``."""
    return now - timedelta(seconds=LEASE_PURGE_AFTER_S)


class WorkItem(BaseModel):
    """A piece of background work for a worker: ``kind`` (``"observe"``) on ``target`` (a thread id).

    ``claimed_by`` / ``claim_token`` / ``claim_expires_at`` are set while a worker holds it; the
    token is a fencing token (a new, higher one for every claim), and ``complete_work`` /
    ``renew_work`` / ``release_work`` only act for the claim that is still current. ``attempts``
    counts claims, so a worker can give up on an item that keeps killing its workers.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    kind: str
    target: str
    payload: dict[str, Any] = Field(default_factory=dict)
    enqueued_at: datetime
    available_at: datetime
    attempts: int = 0
    claimed_by: str | None = None
    claim_token: int | None = None
    claim_expires_at: datetime | None = None
    last_error: str | None = None

    def claim_expired(self, now: datetime) -> bool:
        return self.claim_expires_at is not None and self.claim_expires_at <= now


class DeadWork(BaseModel):
    """A work item moved out of the queue because it kept failing (``Store.bury_work``).

    Kept, never silently deleted: ``id``, ``kind``, ``target``, ``payload`` and ``enqueued_at``
    are the item's, ``attempts`` the claims it used, ``last_error`` its last failure and
    ``failed_at`` when it was buried. ``retry_dead_work`` queues it again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    kind: str
    target: str
    payload: dict[str, Any] = Field(default_factory=dict)
    enqueued_at: datetime
    attempts: int = 0
    last_error: str | None = None
    failed_at: datetime


class WorkCounts(BaseModel):
    """One kind's depth in the work queue at ``now`` (:func:`count_work`): ``waiting`` items
    (unclaimed), of them ``due`` (``available_at <= now``), ``claimed`` ones, of them
    ``expired_claims`` (``claim_expires_at <= now``), and the ``enqueued_at`` of its oldest item
    (waiting or claimed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    waiting: int = 0
    due: int = 0
    claimed: int = 0
    expired_claims: int = 0
    oldest_enqueued_at: datetime


class LeaseCounts(NamedTuple):
    """How many leases a prefix holds (:func:`count_leases`), and how many of them have expired."""

    total: int
    expired: int


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The outcome of a compare-and-set write.

    ``applied``: the write happened and ``record`` is the stored row (version bumped).
    ``stale``: someone else wrote first (or the row was retired); ``record`` is the current
    head to retry from. ``gone``: the thread or lineage was deleted; ``record`` is None.
    """

    status: Literal["applied", "stale", "gone"]
    record: ObservationRecord | None

    @property
    def applied(self) -> bool:
        return self.status == "applied"


class ClosingContext:
    """``async with store:`` for adapters: returns the store and closes it on exit."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


@runtime_checkable
class Store(Protocol):
    """An obsmem store. All methods are coroutines; adapters keep blocking I/O off the loop."""

    url: str

    async def close(self) -> None: ...

    # ``async with store:`` closes the store on exit (``__aenter__`` returns the store itself).
    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    # -- schema --------------------------------------------------------------------------
    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Bring the store's schema up to date; the names of the steps applied now, in order.

        With ``dry_run``, only read: the names of the steps still pending. Safe to run from
        several processes at once (each step is applied by exactly one). A store opens its
        schema up to date by itself on first use; this is for ``obsmem migrate`` and deploys
        that migrate ahead of time. A store without a schema (in memory) has no steps.
        """
        ...

    # -- threads -------------------------------------------------------------------------
    async def create_thread(self, thread: Thread) -> Thread:
        """Insert a thread; if one with this id exists, return it unchanged (idempotent).

        NaN or ±Infinity in its metadata → InvalidInputError naming ``metadata``, nothing written
        (:func:`~obsmem.storage.rules.check_storable`; so does :meth:`update_thread`)."""
        ...

    async def get_thread(self, thread_id: str) -> Thread | None: ...

    async def list_threads(
        self, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None,
        since: datetime | None = None, newest_first: bool = False, before: str | None = None,
    ) -> list[Thread]:
        """Threads of a resource, oldest first; ``after`` and ``since`` as in :meth:`list_all_threads`.

        ``newest_first`` (an optional keyword: :func:`newest_threads` reads a store without it):
        most recently active first. A thread's activity is a store-wide counter drawn when it is
        created and again, in the save's transaction, whenever a message is inserted into it (a
        message saved again under its id, or deleted, does not move it), read from an index on
        (resource_id, activity). The answer is a :class:`ThreadPage`: its ``next_before`` is the
        ``before`` of the page after it, the position of its last thread as the page read it, so a
        thread written between pages moves only itself (one that got a message shows again at the
        top of a new pass, not again in this one; every other thread shows once). ``after``: a
        thread id, the page after that thread's current place (a cursor thread that got a message
        since restarts the listing from its new place, so ``before`` is the cursor to keep);
        ``since`` is refused with it."""
        ...

    async def list_all_threads(
        self, *, limit: int = 100, offset: int = 0, after: str | None = None, since: datetime | None = None
    ) -> list[Thread]:
        """Every thread of every resource, oldest first (``created_at``, then insertion order).

        For tools that show what a store holds (``obsmem threads`` without ``--resource``); an
        engine serving a user lists that user's threads with :meth:`list_threads`. Negative
        ``limit`` or ``offset`` → InvalidInputError.

        ``after``: the id of the last thread of the previous page. The page holds the threads
        that follow it in this order (``offset`` counts from there), read from an index at that
        point, so a page costs the same however far in it is, and a thread created or deleted
        between pages neither hides nor repeats another (with ``offset`` alone, deleting a thread
        already read skips the first thread of the next page). A thread of that id that no
        longer exists → ThreadNotFoundError: :func:`obsmem.storage.paging.all_threads` then pages
        on from an earlier thread of the page.

        ``since``: only threads created at or after this instant (to the microsecond), read from
        the same index, so a page can start at a position in the listing whose thread is gone
        (recall's ``next_page`` resumes this way past a deleted thread).
        """
        ...

    async def update_thread(self, thread: Thread, *, expected_version: int) -> Thread | None:
        """Compare-and-set on ``version``; returns the stored thread, or None when stale/gone."""
        ...

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete a thread, its messages and its thread-scoped observation lineage.

        Returns False if it did not exist. In-flight engine writes to it then report ``gone``.
        """
        ...

    # -- messages ------------------------------------------------------------------------
    async def save_messages(
        self, thread_id: str, messages: list[Message], *, after_seq: int | None = None
    ) -> list[Message]:
        """Upsert by id and return the stored messages (with ``seq``, ``thread_id``, ``resource_id``).

        A new id gets the next ``seq``. An existing id in the same thread keeps its ``seq``
        and ``created_at``; its role, parts and metadata are replaced. An existing id in a
        *different* thread raises InvalidInputError. Unknown thread → ThreadNotFoundError.
        NaN or ±Infinity in a message's metadata or a data part's data → InvalidInputError naming
        it (``messages[1].metadata``), nothing of the batch written (so :meth:`add_message_parts`).

        ``after_seq`` (an ordering guard): the newest ``seq`` of the thread the caller checked
        its messages' place against (0: an empty thread). When the thread holds a newer message
        that calls or answers a tool at the moment of the save, nothing is saved and
        :class:`~obsmem.errors.ThreadChangedError` is raised; checked in the save's own
        transaction, so of several savers of tool messages that checked against the same newest
        message exactly one succeeds. A turn saves this way: a tool result lands right after its
        call, or the turn reads the thread again. A store written before the guard (no
        ``after_seq`` parameter) still works: the guard is then checked with a read just before
        its save (not atomic with it).

        A message whose id is among the thread's forgotten ids (those a forget rewrote or
        deleted: :func:`obsmem.storage.forgetting.forgotten_ids`) is neither written nor
        returned, checked in the save's own write (an old copy saved back, even by a caller that
        read the thread before the forget noted it, cannot bring the value back); when the
        thread's list is full (:data:`MAX_FORGOTTEN_IDS`), a store with the native methods of
        :func:`note_forgotten_ids` checks the batch's ids against its table of them too; inside
        :func:`rewriting` (obsmem rewriting what it read) it is written as any other.

        A reply's receipt (``metadata["obsmem_receipt"]``) is written without its groups and raw
        span of other threads that no longer exist, checked in the save's own write
        (:func:`obsmem.storage.rules.without_receipt_threads`): a reply made while a thread its
        context showed was deleted names no deleted thread.
        """
        ...

    async def list_messages(
        self,
        thread_id: str,
        *,
        after_seq: int = 0,
        before_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        """Messages with ``after_seq < seq < before_seq``, ordered by seq.

        With ``newest_first`` and a ``limit``, returns the newest ``limit`` messages, still
        newest first. Unknown thread → ThreadNotFoundError.
        """
        ...

    async def list_resource_messages(self, resource_id: str, *, after_seq: int = 0) -> list[Message]:
        """Every message of every thread of a resource with ``seq > after_seq``, by seq."""
        ...

    async def list_resource_messages_after(
        self, resource_id: str, cursors: Mapping[str, int], *, exclude_thread_id: str | None = None
    ) -> list[Message]:
        """The messages of the resource's threads (but ``exclude_thread_id``) each newer than its
        thread's cursor: ``seq > cursors[thread_id]``, or every message of a thread ``cursors``
        does not name; by seq. Reads those rows only (a thread's messages newer than its cursor,
        from an index on ``(thread_id, seq)``), never what lies at or below a cursor: memory's
        per-turn read of what it has not observed of a resource's other threads."""
        ...

    async def get_messages(self, message_ids: list[str]) -> list[Message]:
        """The messages that exist among ``message_ids``, in seq order."""
        ...

    async def add_message_parts(self, message_id: str, parts: list[DataPart]) -> Message:
        """Append data parts (markers) to a stored message, atomically.

        A part whose ``(name, data["cycle_id"])`` already exists on the message is skipped, so
        a retried write never duplicates a marker (a part without a ``cycle_id`` is skipped
        when an identical part exists). Unknown id → MessageNotFoundError.
        """
        ...

    async def count_messages(self, thread_id: str) -> int: ...

    async def delete_messages(self, message_ids: list[str]) -> int:
        """Delete the messages among ``message_ids`` (for forgetting); how many went.

        Their ``seq`` values are never handed out again, so cursors keep their meaning.
        """
        ...

    # -- observation records ---------------------------------------------------------------
    async def get_head(self, lineage: str) -> ObservationRecord | None: ...

    async def get_record(self, record_id: str) -> ObservationRecord | None: ...

    async def list_generations(
        self, lineage: str, *, limit: int = 100, offset: int = 0
    ) -> list[ObservationRecord]:
        """All generations of a lineage, newest first."""
        ...

    async def create_record(self, record: ObservationRecord) -> WriteResult:
        """Insert the first generation, only if the lineage has no live head.

        ``applied`` with the stored record, or ``stale`` with the existing head. If the
        record's thread does not exist (thread scope) → ``gone``.
        """
        ...

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        """Compare-and-set: store ``record`` (same id) if the stored version is ``expected_version``
        and the row is still the live head. The stored version becomes ``expected_version + 1``.
        """
        ...

    async def create_generation(
        self, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int
    ) -> WriteResult:
        """Atomically retire ``current`` (if still the head at ``expected_version``) and insert
        ``successor`` as the new head with ``generation = current.generation + 1``.

        Cursors of the successor must not be below the current head's.
        """
        ...

    async def delete_lineage(self, lineage: str) -> int:
        """Delete every generation of a lineage; returns how many rows went."""
        ...

    async def rewrite_generation(
        self, record: ObservationRecord, *, expected: ObservationRecord | None = None
    ) -> bool:
        """Replace the content of a *retired* generation (same id) with ``record``'s, in place.

        For forgetting only: older generations are otherwise immutable. The stored identity,
        chain link (``superseded_by``), generation, version and ``created_at`` stay. False when
        no retired generation has this id (the live head is written with :meth:`update_record`,
        compare-and-set).

        ``expected`` (compare-and-set): the generation as the caller read it; the rewrite is
        applied only while the stored generation still equals it (:func:`same_record`), else
        False and nothing is written: another eraser rewrote it meanwhile, so the caller reads
        it again and redoes its change (a blind rewrite would bring back what that one removed).
        Without it the rewrite is blind (a store written before ``expected``: see
        :func:`rewrite_generation_if_unchanged`).
        """
        ...

    # -- leases ----------------------------------------------------------------------------
    async def acquire_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        """Take the lease on ``key`` for ``owner`` until ``now + ttl_s``, atomically.

        * Free (never taken, or released) or expired (``expires_at <= now``): ``owner`` gets it
          with a new, higher fencing token and ``acquired_at = now``. This holds for the
          previous holder too: re-acquiring after expiry is a new acquisition.
        * Held by ``owner`` and not expired: renewed, same token and ``acquired_at``, new
          ``expires_at = now + ttl_s``.
        * Held by another owner and not expired: None, and nothing changes.

        A new acquisition (not a renewal) also deletes up to :data:`LEASE_PURGE_BATCH` other
        leases expired at or before ``now - LEASE_PURGE_AFTER_S``
        (:func:`lease_purge_before`): expired leases never released do not pile up.

        Of any number of callers racing for a free key, in one process or many, exactly one
        gets a lease. ``ttl_s`` must be positive and ``now`` timezone-aware, else
        InvalidInputError.
        """
        ...

    async def renew_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        """Extend the lease to ``now + ttl_s`` if ``owner`` holds it and it has not expired.

        Returns the renewed lease (same token), or None when the caller lost it: it expired,
        was released, or another owner took it. A lost lease is never revived by ``renew``;
        the caller may try ``acquire_lease`` again, which gives it a new token.
        """
        ...

    async def release_lease(self, key: str, owner: str) -> bool:
        """Delete the lease if ``owner`` holds it (expired or not); True if one was deleted.

        Releasing a lease held by someone else, or no lease, changes nothing and returns False.
        """
        ...

    async def get_lease(self, key: str) -> Lease | None:
        """The stored lease on ``key``, expired or not (compare ``expires_at`` with your clock)."""
        ...

    async def list_leases(self, prefix: str = "") -> list[Lease]:
        """Stored leases whose key starts with ``prefix`` (literally, case-sensitive), by key.

        Expired leases are included until someone takes or releases them, or another key's
        acquisition purges them (expired :data:`LEASE_PURGE_AFTER_S` before it); the store has
        no clock of its own to filter them.
        """
        ...

    # -- working memory --------------------------------------------------------------------
    async def get_working_memory(self, key: str) -> str | None: ...

    async def set_working_memory(self, key: str, text: str) -> None: ...

    async def delete_working_memory(self, key: str) -> bool:
        """Delete the working memory under ``key``; True if there was one."""
        ...

    # -- work queue ------------------------------------------------------------------------
    async def enqueue_work(
        self,
        kind: str,
        target: str,
        *,
        now: datetime,
        payload: dict[str, Any] | None = None,
        delay_s: float = 0.0,
    ) -> WorkItem:
        """Add work, available from ``now + delay_s``; returns the waiting item.

        If an unclaimed item with the same ``kind`` and ``target`` is already waiting, no second
        one is added: that item is returned, with the earlier of the two availability times and
        the new payload (when one is given). An item being worked on does not absorb new work:
        enqueueing while it runs adds a waiting item, so work that arrived after the worker read
        the thread is never lost. Empty kind/target, negative or non-finite delay, or a naive
        ``now`` → InvalidInputError.
        """
        ...

    async def claim_work(
        self, owner: str, *, ttl_s: float, now: datetime, kinds: tuple[str, ...] | None = None, limit: int = 1
    ) -> list[WorkItem]:
        """Claim up to ``limit`` items for ``owner`` until ``now + ttl_s``, oldest first.

        Claimable: waiting items with ``available_at <= now``, and claimed items whose claim has
        expired (``claim_expires_at <= now``). Each claimed item gets a new, higher
        ``claim_token`` and ``attempts + 1``. Of many claimers racing, in any number of
        processes, each item goes to exactly one (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so
        claimers never wait on each other).
        """
        ...

    async def renew_work(self, item: WorkItem, *, ttl_s: float, now: datetime) -> WorkItem | None:
        """Extend a claim to ``now + ttl_s`` if it is still current and unexpired; else None."""
        ...

    async def complete_work(self, item: WorkItem) -> bool:
        """Remove a claimed item if ``item``'s claim is still the current one (expired or not).

        False when another worker has claimed it since (its token changed) or it is gone.
        """
        ...

    async def release_work(
        self, item: WorkItem, *, now: datetime, delay_s: float = 0.0, error: str | None = None,
        count_attempt: bool = True,
    ) -> bool:
        """Give a claimed item back to wait until ``now + delay_s`` (e.g. after a failure).

        Only for the current claim (else False). If another item with the same kind and target
        is already waiting, the two coalesce into the waiting one. With ``count_attempt=False``
        the hand-back is not a failure (the work had to wait, e.g. for another owner's lease):
        the claim's attempt is given back and ``error`` is ignored (the last real error stays).
        """
        ...

    async def wake_work(self, kind: str, target: str, *, now: datetime) -> bool:
        """Make the item of ``kind`` on ``target`` that waits for a later time due at ``now``.

        For the owner of a lease that was just released: work handed back to wait for that lease
        (``release_work(..., count_attempt=False)``, due at the lease's expiry) is claimable at
        once instead. Only the waiting (unclaimed) item is touched, and only its ``available_at``:
        attempts, last error and payload stay, claimed items are left alone, and nothing is
        added. False when no item of ``kind`` on ``target`` waits for a time after ``now``.
        Empty kind/target or a naive ``now`` → InvalidInputError.
        """
        ...

    async def bury_work(self, item: WorkItem, *, now: datetime, error: str | None = None) -> bool:
        """Move a claimed item that keeps failing to the dead-letter table, with ``error`` as
        its last error (``None``: keep the item's ``last_error``) and ``failed_at = now``.

        Only for the current claim (else False, nothing changes).
        """
        ...

    async def list_dead_work(self, kind: str | None = None) -> list[DeadWork]:
        """The buried items (of ``kind``, or all), by id."""
        ...

    async def retry_dead_work(self, dead_id: int, *, now: datetime) -> WorkItem | None:
        """Queue a buried item again, due at ``now`` with fresh attempts, and remove it from the
        dead-letter table; it coalesces into an item already waiting for the same kind and
        target, like ``enqueue_work``. None when there is no such buried item."""
        ...

    async def list_work(self, kind: str | None = None) -> list[WorkItem]:
        """Every queued item (waiting or claimed, expired or not), by id."""
        ...

    async def delete_work(self, target: str) -> int:
        """Delete every queued item for ``target`` (any kind, waiting or claimed); how many went.
        Its buried items (``list_dead_work``) are deleted too, without being counted.

        A worker holding one of them then finds its claim gone (``complete_work`` → False).
        """
        ...

    # -- cost ledger -----------------------------------------------------------------------
    async def record_model_calls(self, calls: Sequence[ModelCall]) -> int:
        """Append one ledger row per call (in one transaction); how many were written.

        A row holds the call's role, model, kind, operation, thread and resource ids, token
        counts, latency, outcome, error type and finish reason, and its start time; no text.
        """
        ...

    async def usage_rows(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageRow]:
        """The ledger summed per (UTC day of ``started_at``, role, model), ordered by them.

        Only calls of ``thread_id`` and/or ``resource_id`` (both: both must match) that started
        at or after ``since`` and before ``until`` count. ``cost_usd`` / ``unpriced_calls`` stay
        0: prices are applied above the store. ``failed`` counts calls whose outcome is not
        ``ok``. A naive ``since`` / ``until`` → InvalidInputError.
        """
        ...

    async def delete_model_calls(self, *, thread_id: str | None = None, resource_id: str | None = None) -> int:
        """Delete the ledger rows of ``thread_id`` or of ``resource_id`` (one of them); how many went."""
        ...


async def read_window(store: Store, lineage: str, thread_id: str) -> tuple[ObservationRecord | None, list[Message]]:
    """The live head of ``lineage`` and ``thread_id``'s messages after its cursor, by seq.

    With no head, every message of the thread (cursor 0). Unknown thread → ThreadNotFoundError
    (as from ``list_messages``). A store may read both in one snapshot with a method of the same
    name, ``read_window(lineage, thread_id)``; it is optional (not part of :class:`Store`), so a
    store without it keeps working: this composes ``get_head`` and ``list_messages``.
    """
    native = getattr(store, "read_window", None)
    if native is not None:
        window: tuple[ObservationRecord | None, list[Message]] = await native(lineage, thread_id)
        return window
    head = await store.get_head(lineage)
    return head, await store.list_messages(thread_id, after_seq=head.cursor(thread_id) if head else 0)


WindowMark = tuple[int, int, str | None, int | None]
"""What a thread's window was read at: the thread's row (never reused: a thread deleted and
created again with the same id is another thread), its message revision (one more for every
message row of the thread inserted, updated or deleted, by any path) and the live head's id and
version (``None, None``: no head). Two reads of one window with the same mark read the same thing, so a
reader that kept what it read may use it again while the mark stays (:mod:`obsmem.om.windows`).
Optional: a store that cannot mark its windows simply lacks the methods below, and every
window is read afresh."""


async def read_marked_window(
    store: Store, lineage: str, thread_id: str
) -> tuple[ObservationRecord | None, list[Message], WindowMark | None]:
    """:func:`read_window` and the window's mark, read in one snapshot (native method
    ``read_window_marked(lineage, thread_id)``); the mark is None when the store cannot mark."""
    native = getattr(store, "read_window_marked", None)
    if native is not None:
        marked: tuple[ObservationRecord | None, list[Message], WindowMark] = await native(lineage, thread_id)
        return marked
    head, messages = await read_window(store, lineage, thread_id)
    return head, messages, None


def forget_cached(store: Store) -> None:
    """Drop what ``store`` keeps in this process of rows it read (native method
    ``forget_cached()``; a store without one keeps nothing): called after a delete or a forget,
    so no copy of what went stays in this process's memory."""
    native = getattr(store, "forget_cached", None)
    if native is not None:
        native()


async def window_mark(store: Store, lineage: str, thread_id: str) -> WindowMark | None:
    """The window's mark now (native method ``window_mark(lineage, thread_id)``, a read of one
    row); None when the store cannot mark or the thread is unknown (read the window then)."""
    native = getattr(store, "window_mark", None)
    if native is None:
        return None
    mark: WindowMark | None = await native(lineage, thread_id)
    return mark


async def save_marked(
    store: Store, lineage: str, thread_id: str, messages: list[Message], *, after_seq: int | None = None
) -> tuple[list[Message], WindowMark | None, WindowMark | None]:
    """``save_messages`` and the window's mark just before and just after it, in its transaction
    (native method ``save_messages_marked(thread_id, messages, lineage, after_seq=None)``): when the
    mark before is the one a reader kept, the reader's window plus what was saved is the window at
    the mark after. Both marks are None when the store cannot mark. ``after_seq``: the ordering
    guard of :meth:`Store.save_messages` (see :func:`save_guarded` for a store without marks)."""
    guard: dict[str, int] = {} if after_seq is None else {"after_seq": after_seq}
    native = getattr(store, "save_messages_marked", None)
    if native is not None:
        marked: tuple[list[Message], WindowMark | None, WindowMark | None] = await native(
            thread_id, messages, lineage, **guard
        )
        return marked
    return await save_guarded(store, thread_id, messages, after_seq), None, None


async def save_guarded(store: Store, thread_id: str, messages: list[Message], after_seq: int | None) -> list[Message]:
    """``store.save_messages`` with the ordering guard ``after_seq`` (when set): passed on when
    the method takes it, else checked with a read just before the save (:func:`check_guard`;
    a store written before the guard keeps working)."""
    if after_seq is None:
        return await store.save_messages(thread_id, messages)
    if takes_guard(store.save_messages):
        return await store.save_messages(thread_id, messages, after_seq=after_seq)
    await check_guard(store, thread_id, after_seq)
    return await store.save_messages(thread_id, messages)


def takes_guard(save: Callable[..., object]) -> bool:
    """Whether a ``save_messages`` method takes ``after_seq`` (a store written before the
    ordering guard does not)."""
    function = getattr(save, "__func__", save)
    try:
        known = _TAKES_GUARD.get(function)
    except TypeError:  # not weakly referable: not kept
        known = None
    if known is None:
        try:
            parameters = list(inspect.signature(save).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        known = any(p.name == "after_seq" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        try:
            _TAKES_GUARD[function] = known
        except TypeError:
            pass
    return known


_TAKES_GUARD: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


async def check_guard(store: Store, thread_id: str, after_seq: int) -> None:
    """The ordering guard for a store whose ``save_messages`` does not take it: a read of the
    thread's messages newer than ``after_seq`` just before the save (not in its transaction)."""
    for message in reversed(await store.list_messages(thread_id, after_seq=after_seq)):
        if message.tool_calls or message.tool_results:
            raise ThreadChangedError(thread_id, after_seq, message.seq or 0)


async def save_marked_early(
    store: Store, lineage: str, thread_id: str, messages: list[Message], *, after_seq: int | None = None
) -> tuple[list[Message], WindowMark | None, WindowMark | None, asyncio.Future[None]]:
    """:func:`save_marked`, returning as soon as the rows are written in the save's transaction,
    before its commit has reached the disk: the fourth value is the commit, a future that
    completes when the save is durable, or fails with the save's error (then nothing of it is
    stored). The caller may do work that only *reads* what was returned meanwhile (build a
    context from it), and must await the commit before it writes anything derived from it or
    returns it as saved. Native method ``save_messages_marked_early(thread_id, messages,
    lineage, after_seq=None)``; any other store saves in full first (the commit is then already
    done). ``after_seq``: as for :func:`save_marked`."""
    guard: dict[str, int] = {} if after_seq is None else {"after_seq": after_seq}
    native = getattr(store, "save_messages_marked_early", None)
    if native is not None:
        early: tuple[list[Message], WindowMark | None, WindowMark | None, asyncio.Future[None]] = await native(
            thread_id, messages, lineage, **guard
        )
        return early
    saved, before, after = await save_marked(store, lineage, thread_id, messages, after_seq=after_seq)
    return saved, before, after, committed()


def committed() -> asyncio.Future[None]:
    """The commit of a save that is durable already (what :func:`save_marked_early` hands back
    for a store that saves in full first)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


async def update_record_marking(
    store: Store, record: ObservationRecord, *, expected_version: int, message_id: str, parts: list[DataPart],
    lineage: str,
) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
    """``update_record`` and, when it applies, ``add_message_parts`` (markers of the write on one
    of the messages it covers) in one transaction, with the marks of the message's window just
    before and after the parts: native method ``update_record_marking(record, expected_version=,
    message_id=, parts=, lineage=)``. The message is None when the parts were not written (the
    message is gone, they failed, or the store has no such method: then only the compare-and-set
    ran, and the caller writes the parts as it would, :func:`add_parts_marked`). A failure of the
    parts never undoes the record."""
    native = getattr(store, "update_record_marking", None)
    if native is not None:
        marked: tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None] = await native(
            record, expected_version=expected_version, message_id=message_id, parts=parts, lineage=lineage
        )
        return marked
    return await store.update_record(record, expected_version=expected_version), None, None, None


async def create_generation_marking(
    store: Store, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int,
    message_id: str, parts: list[DataPart], lineage: str,
) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
    """``create_generation`` and, when it applies, ``add_message_parts`` (the markers of the
    reflection that made it, on one of the messages of its thread) in one transaction, as
    :func:`update_record_marking` does for a record update: native method
    ``create_generation_marking(current, successor, expected_version=, message_id=, parts=,
    lineage=)``. The message is None when the parts were not written with it (then the caller
    writes them as it would). A failure of the parts never undoes the generation."""
    native = getattr(store, "create_generation_marking", None)
    if native is not None:
        marked: tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None] = await native(
            current, successor, expected_version=expected_version, message_id=message_id, parts=parts,
            lineage=lineage,
        )
        return marked
    return await store.create_generation(current, successor, expected_version=expected_version), None, None, None


async def add_parts_marked(
    store: Store, lineage: str, message_id: str, parts: list[DataPart]
) -> tuple[Message, WindowMark | None, WindowMark | None]:
    """``add_message_parts`` and the mark of the message's thread's window just before and just
    after it, in its transaction (native method ``add_message_parts_marked(message_id, parts,
    lineage)``); both None when the store cannot mark."""
    native = getattr(store, "add_message_parts_marked", None)
    if native is not None:
        marked: tuple[Message, WindowMark | None, WindowMark | None] = await native(message_id, parts, lineage)
        return marked
    return await store.add_message_parts(message_id, parts), None, None


# -- compare-and-set rewrites for erasers -------------------------------------------------------
def same_record(stored: ObservationRecord, expected: ObservationRecord) -> bool:
    """Whether a stored generation is still the one a caller read (every field alike)."""
    return stored.model_dump(mode="json") == expected.model_dump(mode="json")


def same_message(stored: Message, expected: Message) -> bool:
    """Whether a stored message's content (role, parts, metadata) is still what a caller read."""
    content = {"role", "parts", "metadata"}
    return stored.model_dump(mode="json", include=content) == expected.model_dump(mode="json", include=content)


def takes_keyword(method: Callable[..., object], name: str) -> bool:
    """Whether ``method`` takes the keyword argument ``name`` (or any keyword)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


async def rewrite_generation_if_unchanged(
    store: Store, record: ObservationRecord, *, expected: ObservationRecord
) -> bool:
    """``store.rewrite_generation(record, expected=expected)``: True when written, False when
    the stored generation is no longer ``expected`` (or gone, or live). A store whose method
    does not take ``expected`` is read and compared just before its (blind) rewrite."""
    if takes_keyword(store.rewrite_generation, "expected"):
        return await store.rewrite_generation(record, expected=expected)
    stored = await store.get_record(record.id)
    if stored is None or not same_record(stored, expected):
        return False
    return await store.rewrite_generation(record)


async def rewrite_message_if_unchanged(store: Store, message: Message, *, expected: Message) -> bool:
    """Replace a stored message's role, parts and metadata with ``message``'s (same id; its
    ``seq``, thread and ``created_at`` stay) only while its stored content is ``expected``'s
    (:func:`same_message`): True when written, False when it changed or went meanwhile (the
    caller reads it again and redoes its change). Native method ``rewrite_message(message,
    expected=)``, compare-and-set in the store; any other store is read and compared just before
    a ``save_messages``."""
    native = getattr(store, "rewrite_message", None)
    if native is not None:
        written: bool = await native(message, expected=expected)
        return written
    return await rewrite_message_by_save(store, message, expected=expected)


async def rewrite_message_by_save(store: Store, message: Message, *, expected: Message) -> bool:
    """:func:`rewrite_message_if_unchanged` for a store that cannot compare and set a message:
    read and compared just before its ``save_messages`` (not atomic with it)."""
    found = await store.get_messages([message.id])
    if not found or not same_message(found[0], expected) or found[0].thread_id is None:
        return False
    with rewriting():
        await store.save_messages(found[0].thread_id, [message])
    return True


_REWRITING: ContextVar[bool] = ContextVar("obsmem_rewriting", default=False)


@contextmanager
def rewriting() -> Iterator[None]:
    """Saves made inside are obsmem rewriting stored messages it just read (a forget's rewrite,
    a late tool result put in its place): a message's id among its thread's forgotten ids does
    not stop them (see :meth:`Store.save_messages`). A store reads it with :func:`saves_forgotten`
    in its ``save_messages`` call, on the caller's task."""
    token = _REWRITING.set(True)
    try:
        yield
    finally:
        _REWRITING.reset(token)


def saves_forgotten() -> bool:
    """Whether the running save is inside :func:`rewriting`."""
    return _REWRITING.get()


#: How many forgotten message ids a thread's row keeps (its ``metadata["obsmem"]["forgotten"]``,
#: the newest): the row is read at every turn boundary. A store with the native methods of
#: :func:`note_forgotten_ids` keeps every one besides, read only for a thread whose list is full.
MAX_FORGOTTEN_IDS: Final = 1_000


async def note_forgotten_ids(store: Store, thread_id: str, ids: Sequence[str]) -> None:
    """Keep ``ids`` (messages a forget rewrote or deleted) as forgotten ids of ``thread_id``, all of
    them however many (optional native methods ``note_forgotten_ids(thread_id, ids)`` and
    ``forgotten_among(thread_id, ids)``, a table of ids only that goes with the thread). A store
    without them keeps only the newest :data:`MAX_FORGOTTEN_IDS` on the thread's row: past that,
    a copy of an older one saved back is stored again. Written before the row's list, so a save
    that finds the list full finds every id the list names here."""
    native = getattr(store, "note_forgotten_ids", None)
    if native is not None and ids:
        await native(thread_id, list(dict.fromkeys(ids)))


async def every_forgotten_id(store: Store, thread_id: str, listed: Sequence[str]) -> list[str]:
    """Every forgotten id of ``thread_id``: ``listed`` (the thread row's list, newest last) and,
    when that list is full, the store's table of them before it (optional native method
    ``list_forgotten_ids(thread_id)``), so the newest stay last. What an export carries."""
    native = getattr(store, "list_forgotten_ids", None)
    if len(listed) < MAX_FORGOTTEN_IDS or native is None:
        return list(listed)
    known = set(listed)
    older = sorted(i for i in await native(thread_id) if i not in known)
    return [*older, *listed]


async def forgotten_among(store: Store, thread_id: str, listed: frozenset[str], ids: Sequence[str]) -> frozenset[str]:
    """Which of ``ids`` are forgotten ids of ``thread_id``: those in ``listed`` (the thread row's
    list) and, when that list is full, those the store's table of them holds (one read of
    ``ids``, only then; see :func:`note_forgotten_ids`)."""
    found = frozenset(i for i in ids if i in listed)
    native = getattr(store, "forgotten_among", None)
    if len(listed) < MAX_FORGOTTEN_IDS or native is None or not ids:
        return found
    more: frozenset[str] = frozenset(await native(thread_id, list(dict.fromkeys(ids))))
    return found | more


async def replace_working_memory_if_unchanged(
    store: Store, key: str, text: str | None, *, expected: str
) -> bool:
    """Set the working memory under ``key`` to ``text`` (None: delete it) only while it is
    ``expected``: True when written, False when it changed or went meanwhile. Native method
    ``replace_working_memory(key, text, expected=)``, compare-and-set in the store; any other
    store is read and compared just before its write."""
    native = getattr(store, "replace_working_memory", None)
    if native is not None:
        written: bool = await native(key, text, expected=expected)
        return written
    if await store.get_working_memory(key) != expected:
        return False
    if text is None:
        await store.delete_working_memory(key)
    else:
        await store.set_working_memory(key, text)
    return True


# -- the work queue, read in bounded amounts ---------------------------------------------------
# ``list_work``, ``list_dead_work`` and ``list_leases`` return every row; a tool that shows the
# queue (``obsmem queue``) or a worker asking whether it is drained needs counts and a page.
# Each function below calls the store's native method of the same name (counted or paged by
# the store: SQL ``COUNT``/``MIN``/``LIMIT``), and composes the whole-list methods for a store
# without one (a third-party store keeps working, reading every row as before).


def check_page_limit(limit: int, name: str = "limit") -> None:
    """A page's size: a whole number of at least 1, else InvalidInputError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"{name} must be a whole number of at least 1, got {limit!r}.", argument=name)


def _check_now(now: datetime) -> None:
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"now must be a timezone-aware datetime, got {now!r}.", argument="now")


def work_counts_of(items: Sequence[WorkItem], now: datetime) -> list[WorkCounts]:
    """:func:`count_work` over items already read, by kind."""
    kinds: dict[str, dict[str, Any]] = {}
    for item in items:
        row = kinds.setdefault(item.kind, {"kind": item.kind, "oldest_enqueued_at": item.enqueued_at})
        if item.claimed_by is None:
            row["waiting"] = row.get("waiting", 0) + 1
            row["due"] = row.get("due", 0) + (item.available_at <= now)
        else:
            row["claimed"] = row.get("claimed", 0) + 1
            row["expired_claims"] = row.get("expired_claims", 0) + item.claim_expired(now)
        row["oldest_enqueued_at"] = min(row["oldest_enqueued_at"], item.enqueued_at)
    return [WorkCounts(**kinds[kind]) for kind in sorted(kinds)]


def lease_counts_of(leases: Sequence[Lease], now: datetime) -> LeaseCounts:
    """:func:`count_leases` over leases already read."""
    return LeaseCounts(len(leases), sum(1 for lease in leases if lease.is_expired(now)))


async def count_work(store: Store, *, now: datetime) -> list[WorkCounts]:
    """The queue's depth per kind at ``now`` (:class:`WorkCounts`), by kind; kinds with no item
    are left out. Native method ``count_work(now=)``: counted in the store, no item read."""
    _check_now(now)
    native = getattr(store, "count_work", None)
    if native is not None:
        counted: list[WorkCounts] = await native(now=now)
        return counted
    return work_counts_of(await store.list_work(), now)


async def has_work(store: Store, kind: str) -> bool:
    """Whether the queue holds an item of ``kind`` (waiting, due later or claimed, expired or
    not). Native method ``has_work(kind)``: one row at most."""
    native = getattr(store, "has_work", None)
    if native is not None:
        found: bool = await native(kind)
        return found
    return bool(await store.list_work(kind))


async def dead_work_page(store: Store, *, limit: int, before_id: int | None = None) -> list[DeadWork]:
    """The newest ``limit`` buried items with an id below ``before_id`` (None: the newest of
    all), newest first: the next page starts before the last id of this one. Native method
    ``dead_work_page(limit=, before_id=)``: ``limit`` rows at most."""
    check_page_limit(limit)
    native = getattr(store, "dead_work_page", None)
    if native is not None:
        page: list[DeadWork] = await native(limit=limit, before_id=before_id)
        return page
    buried = [dead for dead in reversed(await store.list_dead_work()) if before_id is None or dead.id < before_id]
    return buried[:limit]


async def count_dead_work(store: Store) -> int:
    """How many items the dead-letter table holds. Native method ``count_dead_work()``."""
    native = getattr(store, "count_dead_work", None)
    if native is not None:
        counted: int = await native()
        return counted
    return len(await store.list_dead_work())


async def lease_page(store: Store, prefix: str = "", *, limit: int, after_key: str | None = None) -> list[Lease]:
    """The first ``limit`` stored leases whose key starts with ``prefix`` and sorts after
    ``after_key`` (None: from the first), by key (code point order, as :meth:`Store.list_leases`):
    the next page starts after the last key of this one. Native method ``lease_page(prefix,
    limit=, after_key=)``: ``limit`` rows at most."""
    check_page_limit(limit)
    native = getattr(store, "lease_page", None)
    if native is not None:
        page: list[Lease] = await native(prefix, limit=limit, after_key=after_key)
        return page
    held = [lease for lease in await store.list_leases(prefix) if after_key is None or lease.key > after_key]
    return held[:limit]


async def count_leases(store: Store, prefix: str = "", *, now: datetime) -> LeaseCounts:
    """How many stored leases have a key starting with ``prefix``, and how many of them have
    expired at ``now`` (``expires_at <= now``). Native method ``count_leases(prefix, now=)``:
    counted in the store."""
    _check_now(now)
    native = getattr(store, "count_leases", None)
    if native is not None:
        counted: LeaseCounts = await native(prefix, now=now)
        return counted
    return lease_counts_of(await store.list_leases(prefix), now)


#: What the stored form of every message :func:`may_hold_sections` names holds: the start of a
#: resource-scope section tag (``<thread id="…">``, :mod:`obsmem.om.sections`), as JSON spells it
#: (an ASCII run: ``json.dumps`` and ``model_dump_json`` never escape it).
SECTION_NEEDLE = "<thread"


def may_hold_sections(message: Message) -> bool:
    """Whether a data part of ``message`` (a marker, or one an import copied) has ``observations``
    text that may hold a thread's ``<thread id>`` section: the messages a thread's delete takes its
    sections out of."""
    return any(
        isinstance(part, DataPart)
        and isinstance(observations := part.data.get("observations"), str)
        and SECTION_NEEDLE in observations
        for part in message.parts
    )


async def section_messages(store: Store, thread_id: str, *, page: int = 500) -> AsyncIterator[list[Message]]:
    """``thread_id``'s messages that :func:`may_hold_sections` (every one of them; a store may
    add a few that do not), by seq, in lists of ``page`` at most. Native method
    ``section_messages_page(thread_id, after_seq=, limit=)``: the first ``limit`` messages with
    ``seq > after_seq`` whose stored form holds :data:`SECTION_NEEDLE`, by seq (the next page starts
    after the last seq of this one), selected in the store, so only they are read. A store without
    it is read a page of ``list_messages`` at a time (bounded memory, every row read). Unknown
    thread → ThreadNotFoundError."""
    check_page_limit(page, "page")
    native = getattr(store, "section_messages_page", None)
    after = 0
    while True:
        if native is not None:
            batch: list[Message] = await native(thread_id, after_seq=after, limit=page)
        else:
            batch = await store.list_messages(thread_id, after_seq=after, limit=page)
        found = [m for m in batch if may_hold_sections(m)]
        if found:
            yield found
        if len(batch) < page or batch[-1].seq is None:
            return
        after = batch[-1].seq


#: A run of characters every JSON encoder writes as they are: printable ASCII but ``"`` and ``\\``.
_JSON_PLAIN = re.compile(r'[ !#-\[\]-~]+')
#: A needle :func:`metadata_messages` takes: such a run, with the quote that opens or closes the
#: string before or after it when the run begins or ends the value.
_JSON_NEEDLE = re.compile(r'"?[ !#-\[\]-~]+"?')


def json_needle(value: str) -> str:
    """The longest run of ``value`` that every JSON encoder writes as it is (printable ASCII but
    ``"`` and ``\\``): what a store can search its stored JSON for to find ``value`` in a string
    of it, whatever the encoder escapes; ``""`` when ``value`` has no such character. The first of
    equally long runs. A run that begins or ends ``value`` comes with the quote every encoder
    writes there (``'"t"'`` for ``'t'``): a short id is then found as a whole string, not in
    every key and text that holds its letters."""
    best: re.Match[str] | None = None
    for run in _JSON_PLAIN.finditer(value):
        if best is None or len(run.group()) > len(best.group()):
            best = run
    if best is None:
        return ""
    opening = '"' if best.start() == 0 else ""
    closing = '"' if best.end() == len(value) else ""
    return f"{opening}{best.group()}{closing}"


async def metadata_messages(
    store: Store, thread_id: str, needle: str, *, page: int = 500
) -> AsyncIterator[list[Message]]:
    """``thread_id``'s messages whose metadata, as JSON, holds ``needle`` (every one of them; a
    store may add a few that do not: the caller checks what it finds), by seq, in lists of
    ``page`` at most. ``needle``: printable ASCII with no ``"`` or ``\\``, but a ``"`` first or
    last (see :func:`json_needle`), so it reads the same in every store's JSON. Native method
    ``metadata_messages_page(thread_id, needle=, after_seq=, limit=)``: the first ``limit``
    messages with ``seq > after_seq`` whose stored form holds ``needle``, by seq, selected in the
    store, so only they are read. A store without it is read a page of ``list_messages`` at a
    time (bounded memory, every row read). What ``Memory.delete_thread`` reads of the user's
    other threads to take the deleted thread's id out of their replies' receipts. Unknown thread
    → ThreadNotFoundError."""
    check_page_limit(page, "page")
    if not _JSON_NEEDLE.fullmatch(needle):
        raise ValueError(
            f"needle must be printable ASCII without '\"' (but first or last) or '\\\\', got {needle!r}"
        )
    native = getattr(store, "metadata_messages_page", None)
    after = 0
    while True:
        if native is not None:
            batch: list[Message] = await native(thread_id, needle=needle, after_seq=after, limit=page)
        else:
            batch = await store.list_messages(thread_id, after_seq=after, limit=page)
        found = [m for m in batch if needle in json.dumps(m.metadata, default=str)]
        if found:
            yield found
        if len(batch) < page or batch[-1].seq is None:
            return
        after = batch[-1].seq


def _org_order(org: str | None) -> tuple[bool, str]:
    return org is not None, org or ""


async def resource_orgs(store: Store, resource_id: str, *, page: int = 500) -> list[str | None]:
    """The distinct ``org_id`` values of ``resource_id``'s threads (None: a thread of no org),
    None first, then by code point; ``[]`` when the resource has no thread. What a service
    confining each org to its own threads checks before it shows anything resource-wide (a
    resource another org also holds a thread of is never shown whole). Native method
    ``resource_orgs(resource_id)``: answered by the store (SQL ``SELECT DISTINCT`` over the
    resource's rows of threads_by_resource), no thread handed out. A store without it is read a
    page of ``list_threads`` at a time from the listing's cursor (bounded memory, every row read;
    a page whose cursor thread was deleted meanwhile goes on after the one before it, as
    :func:`obsmem.storage.paging.all_threads` does)."""
    check_page_limit(page, "page")
    native = getattr(store, "resource_orgs", None)
    if native is not None:
        found: list[str | None] = await native(resource_id)
        return sorted(set(found), key=_org_order)
    orgs: set[str | None] = set()
    async for batch in _thread_pages(store, resource_id, page):
        orgs.update(thread.org_id for thread in batch)
    return sorted(orgs, key=_org_order)


async def _thread_pages(store: Store, resource_id: str, page: int) -> AsyncIterator[list[Thread]]:
    """``resource_id``'s threads a page of ``list_threads`` at a time from the listing's cursor
    (the fallbacks' bounded read): a page whose cursor thread was deleted meanwhile goes on after
    the one before it, as :func:`obsmem.storage.paging.all_threads` does."""
    cursors: list[str] = []  # the previous page's ids; the last one still there starts the next page
    while True:
        try:
            batch = await store.list_threads(resource_id, limit=page, after=cursors[-1] if cursors else None)
        except ThreadNotFoundError:
            cursors.pop()  # deleted since it was read: go on after the one before it
            continue
        yield batch
        if len(batch) < page:
            return
        cursors = [thread.id for thread in batch]


class ResourceTotals(NamedTuple):
    """What a resource holds, in numbers (:func:`resource_totals`)."""

    threads: int
    messages: int
    #: ``total_tokens_observed`` summed over the live records (heads) of the scope's lineages,
    #: each record once: in thread scope each thread's own, in resource scope the one they share.
    tokens_observed: int


async def resource_totals(
    store: Store, resource_id: str, *, scope: Literal["thread", "resource"], page: int = 500
) -> ResourceTotals:
    """``resource_id``'s thread count, message count (of all its threads) and tokens observed:
    in ``scope`` "thread" the sum of ``total_tokens_observed`` over the heads of its threads'
    lineages (``thread:<id>``), in "resource" that of the resource's lineage's head
    (``resource:<id>``, which its threads share: counted once). A record of the other scope (left
    by a change of configuration) is not counted, as memory does not read it. ``(0, 0, 0)`` for a
    resource without threads (and its resource record, if any, is not counted either).

    Native method ``resource_totals(resource_id, scope=)``: answered by the store (SQL aggregates
    over the resource's rows of threads_by_resource, messages_by_thread and the records' one-head
    index), numbers handed out, no row. A store without it is read a page of ``list_threads`` at
    a time from the listing's cursor (bounded memory; a page whose cursor thread was deleted
    meanwhile goes on after the one before it), each thread's messages counted
    (``count_messages``) and its head read (``get_head``), a thread deleted meanwhile left out."""
    check_page_limit(page, "page")
    if scope not in ("thread", "resource"):
        raise InvalidInputError(f"scope must be 'thread' or 'resource' (got {scope!r})", argument="scope")
    native = getattr(store, "resource_totals", None)
    if native is not None:
        threads, messages, observed = await native(resource_id, scope=scope)
        return ResourceTotals(int(threads), int(messages), int(observed))
    threads = messages = observed = 0
    async for batch in _thread_pages(store, resource_id, page):
        for thread in batch:
            try:
                count = await store.count_messages(thread.id)
            except ThreadNotFoundError:  # deleted since the page was read
                continue
            threads += 1
            messages += count
            if scope == "thread":
                head = await store.get_head(lineage_key("thread", thread.id, resource_id))
                observed += head.total_tokens_observed if head is not None else 0
    if scope == "resource" and threads:
        head = await store.get_head(lineage_key("resource", None, resource_id))
        observed += head.total_tokens_observed if head is not None else 0
    return ResourceTotals(threads, messages, observed)


class ThreadPage(list[Thread]):
    """A page of a newest-first thread listing (:func:`newest_threads`): a list of threads with
    ``marks``, each thread's position as the page read it (opaque: the store that gave it reads it
    back as ``before``), and ``next_before``, the last one's: the ``before`` that reads the page
    after it (None for an empty page)."""

    marks: list[str]

    def __init__(self, threads: Sequence[Thread] = (), marks: Sequence[str] = ()) -> None:
        super().__init__(threads)
        if len(marks) != len(threads):
            raise ValueError("a ThreadPage needs one mark per thread")
        self.marks = list(marks)

    @property
    def next_before(self) -> str | None:
        return self.marks[-1] if self.marks else None


async def newest_threads(
    store: Store, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None,
    before: str | None = None,
) -> ThreadPage:
    """``resource_id``'s threads, most recently active first (:meth:`Store.list_threads` with
    ``newest_first``). A store whose ``list_threads`` does not take ``newest_first`` (written
    before it) is read whole, a page of ``list_threads`` at a time, each thread's newest message
    read (``list_messages(newest_first=True, limit=1)``): its activity is that message's seq, a
    thread without messages ranked below those with one by creation (newest first); its
    ``next_before`` marks the same position."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInputError(f"limit must be a whole number, got {limit!r}.", argument="limit")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(f"offset must be a whole number, got {offset!r}.", argument="offset")
    if takes_keyword(store.list_threads, "newest_first"):
        page = await store.list_threads(
            resource_id, limit=limit, offset=offset, after=after, newest_first=True, before=before
        )
        if not isinstance(page, ThreadPage):
            raise TypeError(f"{type(store).__name__}.list_threads(newest_first=True) must return a ThreadPage")
        return page
    ranked: list[tuple[tuple[int, int, str], Thread]] = []
    async for batch in _thread_pages(store, resource_id, 500):
        for thread in batch:
            try:
                newest = await store.list_messages(thread.id, limit=1, newest_first=True)
            except ThreadNotFoundError:  # deleted since the page was read
                continue
            seq = newest[0].seq if newest and newest[0].seq is not None else 0
            ranked.append(((seq, _created_us(thread), thread.id), thread))
    ranked.sort(key=lambda item: item[0], reverse=True)
    keys = [key for key, _ in ranked]
    if after is not None:
        cursor = next((key for key in keys if key[2] == after), None)
        if cursor is None:
            raise ThreadNotFoundError(after)
        ranked = [item for item in ranked if item[0] < cursor]
    if before is not None:
        mark = _fallback_mark(before)
        ranked = [item for item in ranked if item[0] < mark]
    chosen = ranked[offset : offset + limit]
    return ThreadPage([t for _, t in chosen], [f"{seq}|{created}|{tid}" for (seq, created, tid), _ in chosen])


def _created_us(thread: Thread) -> int:
    return (thread.created_at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _fallback_mark(before: str) -> tuple[int, int, str]:
    try:
        seq, created, thread_id = before.split("|", 2)
        return int(seq), int(created), thread_id
    except (AttributeError, ValueError):
        raise InvalidInputError("before: not a 'next_before' this listing gave", argument="before") from None
