"""What every transition stands on: the engine's parts, one cycle of work, one commit loop.

Every transition has one shape: read the head record → do the (possibly slow) model work outside
any transaction → compose the next record from what was read → compare-and-set. When the write
comes back stale, the store hands back the new head and the transition composes again onto it,
or declines (another writer already did the same work). :func:`commit` is that loop, written
once: one attempt limit, and a short jittered pause between attempts so that writers that
collided do not collide again in lockstep. Nothing holds a lock, so any number of engines, in
any number of processes, can share a store: the storage contract is the only coordination.

:class:`Core` holds what one engine is made of (store, models, config, clock) together with
the reads and the bookkeeping (markers, events, time limits) that every transition shares.
:class:`Cycle` is one unit of model work: its id, where its markers go, its events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any, Generic, Literal, TypeVar
from zoneinfo import ZoneInfo

from obsmem import calls, telemetry
from obsmem.telemetry import log_failure
from obsmem.clock import Clock
from obsmem.config import MAX_FAILURE_BACKOFF_S, MemoryConfig
from obsmem.errors import (
    DegenerateOutputError,
    ObservationError,
    ObsmemError,
    ReflectionError,
    StorageError,
    ThreadNotFoundError,
)
from obsmem.models.retry import FailurePolicy
from obsmem.om import markers
from obsmem.om.activation import LatencyEstimate
from obsmem.om.extractors import Extractor
from obsmem.om.group_index import GroupIndex, held_groups
from obsmem.om.outcomes import EngineEvent
from obsmem.om.protocols import Observer, Reflector
from obsmem.om.regroup import GroupedReflector
from obsmem.om.sections import SectionedReflector, visible_sections, wrap_section
from obsmem.om.selection import observable_messages
from obsmem.om.text.groups import ObservationGroup, observation_group, parse_groups, strip_groups, wrap_group
from obsmem.om.windows import Saved, Windows
from obsmem.storage import leasing
from obsmem.storage.contract import (
    ObservationRecord,
    Store,
    ThreadState,
    WindowMark,
    WriteResult,
    create_generation_marking,
    lineage_key,
    update_record_marking,
)
from obsmem.tokens import TokenCounter
from obsmem.types import DataPart, Message, Thread

__all__ = [
    "BACKOFF_KEY",
    "ERASED_KEY",
    "ERASING_AT_KEY",
    "ERASING_KEY",
    "ERASURES_KEY",
    "ERASURE_ABANDONED_S",
    "Fence",
    "MODEL_TIMEOUT_S",
    "Backoff",
    "BackoffRole",
    "Commit",
    "CommitPolicy",
    "Core",
    "Cycle",
    "traced",
    "Written",
    "backoff_wait_s",
    "commit",
    "describe",
    "erasures",
    "without_backoff",
]

logger = logging.getLogger("obsmem")

#: How long one observer or reflector call may take, retries included, unless configured
#: (``Memory(model_timeout_s=...)``): tens of seconds, so a hung provider never holds memory work
#: (or a turn waiting for it) for minutes.
MODEL_TIMEOUT_S = 60.0

S = TypeVar("S")  # what is compared and set: an observation record, or a thread
P = TypeVar("P")  # what a transition proposes to write
T = TypeVar("T")

#: Most commits succeed at once; under contention (several processes on one thread) a model
#: call's result is worth a few more tries before it is dropped or reported.
COMMIT_ATTEMPTS = 8
COMMIT_BACKOFF_S = 0.005
#: How long a synchronous step's lease lasts unless renewed; its holder renews it every third of
#: that while it works, so a crashed process blocks the step elsewhere for a minute at most.
STEP_LEASE_TTL_S = 60.0


# --------------------------------------------------------------------------------------------
# The commit loop
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitPolicy:
    """How often a commit is tried, and how long to pause between tries.

    The pause is real time on purpose (``sleep`` defaults to :func:`asyncio.sleep`): a virtual
    clock in tests must not move because writers collided. Tests that count or skip the
    pauses pass their own ``sleep`` and a seeded ``rng``.
    """

    attempts: int = COMMIT_ATTEMPTS
    backoff_s: float = COMMIT_BACKOFF_S
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    def pause_s(self, attempt: int) -> float:
        """The pause after failed attempt ``attempt`` (0-based): up to ``backoff × 2^attempt``."""
        return self.rng.uniform(0, self.backoff_s * 2 ** min(attempt, 6))


@dataclass(frozen=True, slots=True)
class Written(Generic[S]):
    """One compare-and-set write: ``applied`` with the stored value, ``stale`` with the current
    value to compose again from (None when there is none any more), or ``gone``."""

    status: Literal["applied", "stale", "gone"]
    current: S | None

    @staticmethod
    def of(result: WriteResult) -> Written[ObservationRecord]:
        return Written(result.status, result.record)


@dataclass(frozen=True, slots=True)
class Commit(Generic[S, P]):
    """How a commit ended.

    ``applied``: ``current`` is the stored value and ``proposal`` what was written.
    ``declined``: compose found nothing (more) to write onto ``current``.
    ``gone``: the thread or lineage was deleted. ``exhausted``: every attempt was stale;
    ``current`` is the last head seen. ``base`` is the value the last write was composed onto
    (None when nothing was written).
    """

    status: Literal["applied", "declined", "gone", "exhausted"]
    current: S | None
    proposal: P | None = None
    base: S | None = None

    @property
    def applied(self) -> bool:
        return self.status == "applied"


async def commit(
    read: Callable[[], Awaitable[S | None]],
    compose: Callable[[S], Awaitable[P | None]],
    write: Callable[[S, P], Awaitable[Written[S]]],
    *,
    policy: CommitPolicy,
    first: S | None = None,
) -> Commit[S, P]:
    """Read (or start from ``first``), compose, compare-and-set; on a stale write compose again
    onto the head the store handed back, after a short pause, up to ``policy.attempts`` times.

    ``compose`` returns what to write onto the value it is given, or None to stop (the work
    no longer applies, or there is nothing to do); ``write`` compares and sets.
    """
    current = first if first is not None else await read()
    base: S | None = None
    for attempt in range(policy.attempts):
        if current is None:
            return Commit("gone", None, base=base)
        proposal = await compose(current)
        if proposal is None:
            return Commit("declined", current, base=base)
        base = current
        written = await write(current, proposal)
        if written.status == "applied":
            return Commit("applied", written.current, proposal, base)
        if written.status == "gone" or written.current is None:
            return Commit("gone", None, proposal, base)
        current = written.current
        logger.debug("obsmem: commit stale (attempt %d of %d); composing again", attempt + 1, policy.attempts)
        if attempt + 1 < policy.attempts:  # no pause after the last try: nothing follows it
            await policy.sleep(policy.pause_s(attempt))
    return Commit("exhausted", current, base=base)


# --------------------------------------------------------------------------------------------
# The erasure fence: work begun before a forget never commits what the forget erased
# --------------------------------------------------------------------------------------------

#: Where a record counts the erasures (``Memory.forget``) of its lineage's messages, carried to
#: every later generation: ``metadata[ERASURES_KEY]`` how many began, ``[ERASED_KEY]`` how many
#: ended, ``[ERASING_AT_KEY]`` when the latest began. A forget raises the first (a
#: compare-and-set on the head, :meth:`Core.begin_erasure`) *before* it changes any message, and
#: the second once it is done (:meth:`Core.end_erasure`, however it ends). Work on the messages
#: (an observation, a buffer, a reflection) reads the record first (:meth:`Fence.of`) and commits
#: only if no forget was running then and none began since (:meth:`Fence.holds`): otherwise what
#: it read may hold what a forget erased, so it commits nothing (its messages stay pending and
#: are observed again as stored now). Kept in the record, not in a process: it fences every
#: engine on the store. A forget whose process died never ends: after ``ERASURE_ABANDONED_S``
#: it no longer holds work back. Which forgets are running is ``metadata[ERASING_KEY]``: each
#: one's own mark (a token, when it began), taken off by its own end, so a dead forget's mark
#: lapses ``ERASURE_ABANDONED_S`` after *it* began, whatever forgets run after it (the counts
#: alone would say one is running for good, counted from the latest start). A record written
#: before that key existed is read by the counts.
ERASURES_KEY = "obsmem_erasures"
ERASED_KEY = "obsmem_erased"
ERASING_AT_KEY = "obsmem_erasing_at"
ERASING_KEY = "obsmem_erasing"
ERASURE_ABANDONED_S = 900.0


def _count(record: ObservationRecord | None, key: str) -> int:
    value = record.metadata.get(key) if record is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _began(value: object) -> datetime | None:
    try:
        since = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return since if since.tzinfo is not None else None


def _lapsed(value: object, now: datetime) -> bool:
    """Whether a forget that began at ``value`` (an ISO time) no longer holds work back."""
    since = _began(value)
    return since is not None and (now - since).total_seconds() >= ERASURE_ABANDONED_S


def running_erasures(record: ObservationRecord | None) -> dict[str, str] | None:
    """The marks of the forgets running on ``record``'s lineage (token -> when it began); None
    for a record written before they were kept (then the counts tell)."""
    value = record.metadata.get(ERASING_KEY) if record is not None else None
    if not isinstance(value, dict):
        return None
    return {str(k): str(v) for k, v in value.items()}


def erasures(record: ObservationRecord | None) -> int:
    """How many erasures of ``record``'s lineage began (0 for none, or a value that cannot be read)."""
    return _count(record, ERASURES_KEY)


@dataclass(frozen=True, slots=True)
class Fence:
    """The erasures of a lineage as work on its messages read them (see :data:`ERASURES_KEY`)."""

    began: int
    running: bool

    @staticmethod
    def of(record: ObservationRecord | None, now: datetime) -> Fence:
        """The fence of ``record``, read before the messages the work reads with it."""
        began = erasures(record)
        marks = running_erasures(record)
        if marks is not None:
            return Fence(began, any(not _lapsed(at, now) for at in marks.values()))
        running = began > _count(record, ERASED_KEY)
        if running and record is not None:
            try:
                since = datetime.fromisoformat(str(record.metadata.get(ERASING_AT_KEY)))
                running = since.tzinfo is None or (now - since).total_seconds() < ERASURE_ABANDONED_S
            except ValueError:
                pass
        return Fence(began, running)

    def holds(self, head: ObservationRecord | None) -> bool:
        """Whether work read under this fence may commit onto ``head``: no forget was running when
        it read, and none began since."""
        return not self.running and erasures(head) == self.began


# --------------------------------------------------------------------------------------------
# Durable backoff: a role whose model keeps failing is not called at every step
# --------------------------------------------------------------------------------------------

#: Where a record keeps its roles' backoffs: ``metadata[BACKOFF_KEY][role]``.
BACKOFF_KEY = "obsmem_backoff"
BackoffRole = Literal["observation", "reflection"]
_ERROR_CHARS = 300


def backoff_wait_s(first_s: float, failures: int) -> float:
    """The wait after ``failures`` failures in a row: none after one (a failure that reaches the
    engine may be bad luck: the next due step tries again), then ``first_s × 2^(failures − 2)``,
    at most 15 minutes (``MAX_FAILURE_BACKOFF_S``): 0, 30, 60, 120 … 900 s by default."""
    if failures <= 1:
        return 0.0
    return float(min(first_s * 2 ** min(failures - 2, 32), MAX_FAILURE_BACKOFF_S))


@dataclass(frozen=True, slots=True)
class Backoff:
    """A role's backoff as a record stores it: failures in a row, until when the threshold paths
    leave its model alone, what kind of failure (``"error"`` or ``"degenerate"``), a short error
    and the model that failed (its name). Stored on the record (not in a process), so every engine
    on the store running that model honours it; one running another model does not (a worker with
    a bad key must not stop an application's healthy observer: the application's context is cut
    meanwhile). A backoff stored without a model (an older obsmem's) holds for every model."""

    failures: int
    until: datetime
    kind: str
    error: str
    model: str | None = None

    @staticmethod
    def of(record: ObservationRecord, role: BackoffRole) -> Backoff | None:
        """The stored backoff of ``role`` (None when there is none, or it cannot be read)."""
        stored = record.metadata.get(BACKOFF_KEY)
        entry = stored.get(role) if isinstance(stored, dict) else None
        if not isinstance(entry, dict):
            return None
        try:
            until = datetime.fromisoformat(str(entry["until"]))
            failures = int(entry["failures"])
        except (KeyError, TypeError, ValueError):
            return None
        if until.tzinfo is None:
            return None
        model = entry.get("model")
        return Backoff(failures, until, str(entry.get("kind", "error")), str(entry.get("error", "")),
                       model if isinstance(model, str) else None)  # fmt: skip

    def data(self) -> dict[str, Any]:
        data = {"failures": self.failures, "until": self.until.isoformat(), "kind": self.kind, "error": self.error}
        return data if self.model is None else {**data, "model": self.model}

    def holds_for(self, model: str | None) -> bool:
        """Whether this backoff stops ``model`` (see the class doc)."""
        return self.model is None or model is None or self.model == model


def without_backoff(metadata: dict[str, Any], role: BackoffRole) -> dict[str, Any]:
    """``metadata`` without ``role``'s backoff (the same dict when it has none)."""
    stored = metadata.get(BACKOFF_KEY)
    if not isinstance(stored, dict) or role not in stored:
        return metadata
    rest = {name: entry for name, entry in stored.items() if name != role}
    cleared = {key: value for key, value in metadata.items() if key != BACKOFF_KEY}
    return {**cleared, BACKOFF_KEY: rest} if rest else cleared


def _with_backoff(metadata: dict[str, Any], role: BackoffRole, backoff: Backoff) -> dict[str, Any]:
    stored = metadata.get(BACKOFF_KEY)
    entries = dict(stored) if isinstance(stored, dict) else {}
    entries[role] = backoff.data()
    return {**metadata, BACKOFF_KEY: entries}


# --------------------------------------------------------------------------------------------
# The engine's parts, and the reads every transition shares
# --------------------------------------------------------------------------------------------


class Core:
    """One engine's store, models, config and clock, and what all its transitions share.

    Built once by the engine and handed to each transition; the transitions read the models
    and the time limit from here at call time, so replacing ``core.observer`` takes effect.
    """

    def __init__(
        self,
        *,
        store: Store,
        observer: Observer,
        reflector: Reflector,
        config: MemoryConfig,
        counter: TokenCounter,
        clock: Clock,
        extractors: Sequence[Extractor] = (),
        reflector_start_level: int = 1,
        failure_policy: FailurePolicy = "throw",
        model_timeout_s: float | None = MODEL_TIMEOUT_S,
        on_event: Callable[[EngineEvent], None] | None = None,
        working_memory_scope: Literal["thread", "resource"] = "thread",
        group_index: GroupIndex | None = None,
        commit_policy: CommitPolicy | None = None,
    ) -> None:
        self.store = store
        self.observer = observer
        self.reflector: Reflector = (
            SectionedReflector(reflector, counter.count_text) if config.scope == "resource" else reflector
        )
        # Retrieval mode: the reflector (whichever it is) sees plain text, and its output comes
        # back grouped with the provenance of what it condensed.
        self.retrieval = config.retrieval.enabled
        if self.retrieval:
            self.reflector = GroupedReflector(self.reflector, counter.count_text)
        self.group_index = group_index if self.retrieval else None
        self.config = config
        self.counter = counter
        self.clock = clock
        self.extractors = tuple(extractors)
        self.reflector_start_level = reflector_start_level
        self.failure_policy: FailurePolicy = failure_policy
        self.model_timeout_s = model_timeout_s
        self.on_event = on_event
        self.working_memory_scope = working_memory_scope
        self.commit_policy = commit_policy or CommitPolicy()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # The config is immutable, so the zone observations are dated in is resolved once.
        self.timezone: tzinfo | None = ZoneInfo(config.timezone) if config.timezone else None
        # How long this engine's observer calls take, for adaptive buffering: on ``clock`` (set
        # against the window's growth, measured on the same clock) and in real seconds (to bound
        # a real wait for a buffer in flight).
        self.observer_latency = LatencyEstimate()
        self.observer_latency_real = LatencyEstimate()
        # Resource scope with sharing: the other-conversations block's tokens per thread, by
        # that thread's shown messages (see obsmem.om.step.other_block_tokens).
        self.other_block_memo: OrderedDict[tuple[str, tuple[tuple[str, str, str], ...]], int] = OrderedDict()
        # The threads' windows as this engine last read or wrote them, each with its store mark.
        self.windows = Windows(store)

    # -- where things live ----------------------------------------------------------------------
    @property
    def resource_scope(self) -> bool:
        return self.config.scope == "resource"

    @property
    def sharing(self) -> bool:
        """Resource scope with ``share_threads_in_resource``: a thread's context shows the others."""
        return self.resource_scope and self.config.share_threads_in_resource

    def lineage(self, thread: Thread) -> str:
        return lineage_key(self.config.scope, thread.id, thread.resource_id)

    def working_memory_key(self, thread: Thread) -> str:
        if self.working_memory_scope == "resource":
            return f"resource:{thread.resource_id}"
        return f"thread:{thread.id}"

    def section(self, thread: Thread, observations: str) -> str:
        """In resource scope every observation lives in its thread's section."""
        return wrap_section(thread.id, observations) if self.resource_scope else observations.strip()

    def package(self, thread: Thread, messages: Sequence[Message], observations: str) -> str:
        """One cycle's observations as stored: a group over ``messages`` (retrieval mode),
        inside the thread's section (resource scope)."""
        if self.retrieval and messages:
            observations = wrap_group(observation_group(thread.id, messages, observations))
        return self.section(thread, observations)

    def observer_view(self, observations: str, thread: Thread) -> str:
        """What an observer is shown of earlier observations for ``thread``: what that thread may
        see (in resource scope its own sections unless threads share), without group tags. An
        observer that echoes its input must never copy a sibling thread's lines into this one."""
        if self.resource_scope:
            observations = visible_sections(observations, thread.id, shared=self.config.share_threads_in_resource)
        return strip_groups(observations) if self.retrieval else observations

    def zone_of(self, newest: Message | None) -> tzinfo | None:
        """The zone a reflector states "now" in: ``MemoryConfig.timezone`` when set, else the
        own offset of ``newest`` (the newest observed message), else None (UTC)."""
        if self.timezone is not None:
            return self.timezone
        if newest is None or newest.created_at.utcoffset() is None:
            return None
        return newest.created_at.tzinfo

    async def reflection_zone(self, thread: Thread, record: ObservationRecord) -> tzinfo | None:
        """:meth:`zone_of` the thread's newest observed message (one read, none with a configured zone)."""
        if self.timezone is not None:
            return self.timezone
        cursor = record.cursor(thread.id)
        if cursor <= 0:
            return None
        newest = await self.store.list_messages(thread.id, before_seq=cursor + 1, limit=1, newest_first=True)
        return self.zone_of(newest[0] if newest else None)

    def message_threshold(self, record: ObservationRecord) -> int:
        return self.config.effective_message_threshold(record.observation_tokens)

    def reflection_threshold(self) -> int:
        return self.config.effective_reflection_threshold()

    # -- reads ----------------------------------------------------------------------------------
    async def head(self, thread: Thread) -> ObservationRecord:
        """The live record for a thread, created on first use."""
        lineage = self.lineage(thread)
        current = await self.store.get_head(lineage)
        if current is not None:
            return current
        now = self.clock.now()
        fresh = ObservationRecord(
            id=f"omr_{uuid.uuid4().hex}",
            lineage=lineage,
            scope=self.config.scope,
            thread_id=None if self.resource_scope else thread.id,
            resource_id=thread.resource_id,
            created_at=now,
            updated_at=now,
            threads={thread.id: ThreadState()},
            config=self.config.snapshot(),
        )
        result = await self.store.create_record(fresh)
        if result.record is None:
            raise ThreadNotFoundError(thread.id)
        if result.applied:
            self.windows.wrote(result.record, None)
        return result.record

    async def stored_head(self, thread: Thread) -> ObservationRecord | None:
        """The live record as stored, or None (never creates one)."""
        return await self.store.get_head(self.lineage(thread))

    async def begin_erasure(self, lineage: str) -> str | None:
        """A forget begins on ``lineage`` (see :data:`ERASURES_KEY`), before it changes any of
        its messages: its mark, for :meth:`end_erasure`. None: the lineage has no head (nothing
        to fence)."""
        now = self.clock.now().isoformat()
        token = uuid.uuid4().hex
        fenced = await self._fence(
            lineage,
            lambda head: {
                ERASURES_KEY: erasures(head) + 1,
                ERASING_AT_KEY: now,
                ERASING_KEY: {**(running_erasures(head) or {}), token: now},
            },
        )
        return token if fenced else None

    async def end_erasure(self, lineage: str, token: str | None = None) -> None:
        """The forget begun by :meth:`begin_erasure` on ``lineage`` (its mark ``token``) is done
        (or failed): its mark comes off, with those of dead forgets that have lapsed."""
        now = self.clock.now()

        def change(head: ObservationRecord) -> dict[str, Any]:
            marks = {
                k: at for k, at in (running_erasures(head) or {}).items() if k != token and not _lapsed(at, now)
            }
            return {ERASED_KEY: min(erasures(head), _count(head, ERASED_KEY) + 1), ERASING_KEY: marks}

        await self._fence(lineage, change)

    async def _fence(self, lineage: str, change: Callable[[ObservationRecord], dict[str, Any]]) -> bool:
        """``change`` the head's fence keys by compare-and-set (:meth:`commit`, retried)."""

        async def compose(head: ObservationRecord) -> ObservationRecord:
            return head.model_copy(update={"metadata": {**head.metadata, **change(head)}})

        done = await self.commit(lambda: self.store.get_head(lineage), compose, self.update)
        if done.status == "exhausted":
            raise StorageError(f"Could not fence '{lineage}' for a forget: other writers kept changing it; run it again.")
        return done.applied

    async def unobserved(self, record: ObservationRecord, thread_id: str) -> list[Message]:
        stored = await self.store.list_messages(thread_id, after_seq=record.cursor(thread_id))
        return observable_messages(stored)

    async def stored_window(self, thread: Thread) -> tuple[ObservationRecord | None, list[Message]]:
        """The live record as stored (None: none yet; never creates one) and the thread's
        messages after its cursor as stored (every message without a record), read together:
        one store call, one snapshot where the store can (:func:`~obsmem.storage.contract.read_window`);
        a window kept by :attr:`windows` whose mark still holds is not read again."""
        return await self.windows.read(self.lineage(thread), thread.id)

    async def input_markers_checked(self, thread_id: str, messages: list[Message]) -> list[Message]:
        """``messages`` (input about to be saved in ``thread_id``) with only the markers obsmem
        wrote (:func:`~obsmem.om.markers.input_with_stored_markers`); a store read only when
        one of them carries a marker."""
        flagged = [m.id for m in messages if markers.has_markers(m)]
        if not flagged:
            return messages
        stored = {m.id: m for m in await self.store.get_messages(flagged) if m.thread_id == thread_id}
        return markers.input_with_stored_markers(messages, stored)

    async def save_messages(self, thread: Thread, messages: list[Message], *, after_seq: int | None = None) -> Saved:
        """``Store.save_messages`` into ``thread``: the messages as stored, the thread's window
        just after the save when known without a read, the save's commit, to await before
        anything is written from what was saved or it is handed out as stored, and whether a
        window read before the save is stale (see :meth:`~obsmem.om.windows.Windows.save`).
        ``after_seq``: the store's ordering guard (see ``Store.save_messages``)."""
        return await self.windows.save(self.lineage(thread), thread.id, messages, after_seq=after_seq)

    async def window(
        self, thread: Thread, stored: tuple[ObservationRecord | None, list[Message]] | None = None
    ) -> tuple[ObservationRecord, list[Message]]:
        """The live record (created on first use) and the thread's unobserved messages: from
        ``stored`` (a :meth:`stored_window`, perhaps extended by messages saved since) when given,
        else read now."""
        record, messages = stored if stored is not None else await self.stored_window(thread)
        if record is None:
            record = await self.head(thread)
            cursor = record.cursor(thread.id)
            messages = [m for m in messages if (m.seq or 0) > cursor]
        return record, observable_messages(messages)

    async def last_activity(self, thread: Thread) -> datetime | None:
        """When the thread's newest assistant message was written (what idleness counts from)."""
        recent = await self.store.list_messages(thread.id, limit=50, newest_first=True)
        return next((m.created_at for m in recent if m.role == "assistant"), None)

    # -- writes ---------------------------------------------------------------------------------
    async def commit(
        self,
        read: Callable[[], Awaitable[S | None]],
        compose: Callable[[S], Awaitable[P | None]],
        write: Callable[[S, P], Awaitable[Written[S]]],
        *,
        first: S | None = None,
    ) -> Commit[S, P]:
        """:func:`commit` under this engine's policy."""
        return await commit(read, compose, write, policy=self.commit_policy, first=first)

    async def update(self, current: ObservationRecord, proposed: ObservationRecord) -> Written[ObservationRecord]:
        """Compare-and-set ``proposed`` over ``current`` (same record, next version)."""
        return self._wrote(await self.store.update_record(proposed, expected_version=current.version), current)

    async def update_marking(
        self, current: ObservationRecord, proposed: ObservationRecord, target: Message | None, parts: Sequence[DataPart]
    ) -> Written[ObservationRecord]:
        """:meth:`update`, and when it applies, :meth:`mark` of ``parts`` on ``target``: in one
        write where the store can (:func:`~obsmem.storage.contract.update_record_marking`: one
        commit for both), else one after the other. The markers never undo the record."""
        return await self._write_marking(
            current, target, parts,
            lambda: self.store.update_record(proposed, expected_version=current.version),
            lambda message_id, lineage: update_record_marking(
                self.store, proposed, expected_version=current.version, message_id=message_id, parts=list(parts),
                lineage=lineage,
            ),
        )

    async def new_generation(
        self, current: ObservationRecord, successor: ObservationRecord
    ) -> Written[ObservationRecord]:
        """Compare-and-set: retire ``current`` and make ``successor`` the head."""
        return self._wrote(
            await self.store.create_generation(current, successor, expected_version=current.version), current
        )

    async def new_generation_marking(
        self, current: ObservationRecord, successor: ObservationRecord, target: Message | None,
        parts: Sequence[DataPart], *, fence: Fence,
    ) -> Written[ObservationRecord]:
        """:meth:`new_generation`, and when it applies, :meth:`mark` of ``parts`` on ``target``: in
        one write where the store can (:func:`~obsmem.storage.contract.create_generation_marking`),
        else one after the other (as :meth:`update_marking`). Written after, the markers quote
        nothing (no ``observations``) once ``fence`` no longer holds: a forget begun since the
        generation may have passed the messages already."""
        return await self._write_marking(
            current, target, parts,
            lambda: self.store.create_generation(current, successor, expected_version=current.version),
            lambda message_id, lineage: create_generation_marking(
                self.store, current, successor, expected_version=current.version, message_id=message_id,
                parts=list(parts), lineage=lineage,
            ),
            fence=fence,
        )

    async def _write_marking(
        self, current: ObservationRecord, target: Message | None, parts: Sequence[DataPart],
        plain: Callable[[], Awaitable[WriteResult]],
        marked: Callable[
            [str, str], Awaitable[tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]]
        ],
        *, fence: Fence | None = None,
    ) -> Written[ObservationRecord]:
        """A head write over ``current`` (``marked`` with the target message's id and window
        lineage, or ``plain`` without a target) and the markers ``parts`` on ``target``: written
        with it when the store did, else after it once it applied, then quoting nothing when
        ``fence`` (if any) no longer holds."""
        if target is None or target.thread_id is None or not parts:
            result, message, before, after = await plain(), None, None, None
            lineage = current.lineage
        else:
            lineage = lineage_key(self.config.scope, target.thread_id, target.resource_id or "")
            result, message, before, after = await marked(target.id, lineage)
        written = self._wrote(result, current)
        if written.status != "applied":
            return written
        if message is not None:
            self.windows.parts_added(lineage, message, before, after)
            return written
        if fence is not None and not fence.holds(await self.store.get_head(current.lineage)):
            parts = [p.model_copy(update={"data": {k: v for k, v in p.data.items() if k != "observations"}})
                     for p in parts]  # fmt: skip
        await self.mark(target, *parts)  # not written with the head: written (or logged) as always
        return written

    def _wrote(self, result: WriteResult, over: ObservationRecord) -> Written[ObservationRecord]:
        """A head write's result; the kept windows follow a head this engine wrote over ``over``."""
        if result.applied and result.record is not None:
            self.windows.wrote(result.record, over)
        return Written.of(result)

    async def reindex(self, thread: Thread, before: str, after: str) -> None:
        """Retrieval with vectors: make the group index follow a committed change of text of
        ``thread``'s head; then settle the groups it wrote against the head as stored now (a
        forget that rewrote it meanwhile: see :meth:`GroupIndex.settle`)."""
        index = self.group_index
        if index is None:
            return
        await index.sync(thread.resource_id, before, after)
        known = {g.id for g in parse_groups(before)}
        written = [g for g in parse_groups(after) if g.id not in known]

        async def held() -> dict[str, ObservationGroup]:
            return held_groups(await self.stored_head(thread))

        await index.settle(thread.resource_id, written, held)

    # -- backoff ----------------------------------------------------------------------------------
    def backoff_first_s(self, role: BackoffRole) -> float | None:
        """The first wait of ``role``'s backoff (None: backoff is off for it)."""
        section = self.config.observation if role == "observation" else self.config.reflection
        first = section.failure_backoff
        return None if first is False else float(first)

    def backing_off(self, record: ObservationRecord, role: BackoffRole, thread_id: str) -> Backoff | None:
        """``role``'s backoff when it is in force now, reported as a ``<role>-backoff-skipped``
        event (the caller then skips the model call); None when the model may be called."""
        if self.backoff_first_s(role) is None:
            return None
        backoff = Backoff.of(record, role)
        if backoff is None or self.clock.now() >= backoff.until or not backoff.holds_for(self.role_model(role)):
            return None
        self.emit(f"{role}-backoff-skipped", thread_id, until=backoff.until.isoformat(), failures=backoff.failures)
        return backoff

    def role_model(self, role: BackoffRole) -> str | None:
        """The name of the model ``role`` runs on in this engine (what its backoff names)."""
        name = getattr(self.observer if role == "observation" else self.reflector, "name", None)
        return name if isinstance(name, str) else None

    async def back_off(self, thread: Thread, role: BackoffRole, exc: BaseException) -> Backoff | None:
        """Record a failure of ``role``'s model on the stored head (one more failure in a row,
        the next wait doubled) and report it as a ``<role>-backoff`` event."""
        first = self.backoff_first_s(role)
        if first is None:
            return None
        kind = "degenerate" if isinstance(exc, DegenerateOutputError) else "error"
        error = describe(exc)[:_ERROR_CHARS]
        waits: list[float] = []

        model = self.role_model(role)

        async def compose(record: ObservationRecord) -> tuple[ObservationRecord, Backoff]:
            previous = Backoff.of(record, role)
            # (another model's failures in a row are not this one's)
            failures = (previous.failures if previous is not None and previous.model == model else 0) + 1
            wait_s = backoff_wait_s(first, failures)
            waits.append(wait_s)
            now = self.clock.now()
            backoff = Backoff(failures, now + timedelta(seconds=wait_s), kind, error, model)
            metadata = _with_backoff(record.metadata, role, backoff)
            return record.model_copy(update={"metadata": metadata, "updated_at": now}), backoff

        async def write(
            record: ObservationRecord, proposal: tuple[ObservationRecord, Backoff]
        ) -> Written[ObservationRecord]:
            return await self.update(record, proposal[0])

        try:
            done = await self.commit(lambda: self.stored_head(thread), compose, write)
        except ObsmemError as exc_store:  # the failure is already reported; the backoff is a saving
            log_failure(logger, "obsmem: could not record the %s backoff of thread %s", role, thread.id,
                        error=exc_store, thread_id=thread.id, operation=role)
            return None
        if not done.applied or done.proposal is None:
            return None
        backoff = done.proposal[1]
        self.emit(
            f"{role}-backoff", thread.id, until=backoff.until.isoformat(), failures=backoff.failures,
            kind=kind, error=error, wait_s=waits[-1],
        )
        return backoff

    # -- leases -----------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def leased(self, key: str) -> AsyncIterator[bool]:
        """Hold the lease ``key`` (renewed as the work runs) for the ``async with`` body, which
        gets True; False when another holder has it: the body must then make no model call.

        Each entry is its own owner, so two steps of one engine exclude each other as two
        processes do. The lease only spares duplicate paid calls; what is written stays
        compare-and-set, so a holder that lost its lease (it expired) is still safe.
        """
        owner = f"{self.owner}:{uuid.uuid4().hex[:8]}"
        if not await leasing.acquired(self.store, key, owner, ttl_s=STEP_LEASE_TTL_S, clock=self.clock):
            yield False
            return
        # Released at the body's end whatever ends it: an anyio cancel scope (a request's
        # deadline) cancels every await of a cleanup, and a lease left held would make every
        # turn of the thread skip its observation for the TTL.
        async with leasing.holding(self.store, key, owner, ttl_s=STEP_LEASE_TTL_S, clock=self.clock):
            yield True

    # -- bookkeeping ----------------------------------------------------------------------------
    async def mark(self, target: Message | None, *parts: DataPart) -> None:
        """Persist markers on ``target`` in one write; None (no assistant message) skips them."""
        if target is None or not parts:
            return
        try:
            if target.thread_id is None:  # not a stored message: no window holds it
                await self.store.add_message_parts(target.id, list(parts))
            else:
                lineage = lineage_key(self.config.scope, target.thread_id, target.resource_id or "")
                await self.windows.add_parts(lineage, target.id, list(parts))
        except ObsmemError as exc:  # a marker is a record of work, never a reason to lose it
            log_failure(logger, "obsmem: could not persist markers %s", [p.name for p in parts], error=exc,
                        operation="markers")

    def marker_config(self, record: ObservationRecord) -> markers.MarkerConfig:
        return markers.MarkerConfig(
            message_tokens=self.message_threshold(record),
            observation_tokens=self.reflection_threshold(),
            scope=self.config.scope,
        )

    def emit(self, kind: Any, thread_id: str, /, **data: Any) -> None:
        telemetry.record_event(kind, data)
        if self.on_event is not None:
            self.on_event(EngineEvent(kind=kind, thread_id=thread_id, data=data))

    async def timed(self, work: Awaitable[T], what: str) -> T:
        """``work`` under the model time limit; running past it is a typed error naming ``what``."""
        if self.model_timeout_s is None:
            return await work
        try:
            async with asyncio.timeout(self.model_timeout_s):
                return await work
        except TimeoutError as exc:
            error = ReflectionError if "reflection" in what else ObservationError
            raise error(f"The {what} model call did not finish within {self.model_timeout_s:g} s.") from exc

    def cycle(
        self,
        kind: CycleKind,
        thread: Thread,
        record: ObservationRecord | None,
        target: Message | None,
    ) -> Cycle:
        """A new cycle of ``kind`` over ``thread``, started now, on ``record`` (None: not read yet)."""
        cycle_id = markers.new_cycle_id(_ID_PREFIX[kind])
        return Cycle(self, kind, cycle_id, thread.id, record.id if record else "", self.clock.now(), target)


@contextlib.contextmanager
def traced(name: str, thread: Thread, **attributes: telemetry.AttributeValue | None) -> Iterator[telemetry.Span]:
    """One operation's span (``name``, with the thread's ids and ``attributes`` under ``obsmem.``)
    and the call scope of its model calls: the thread's ids. No role: each metered model names
    its own (the observer's calls book as ``observer``, the embeddings of a re-index made
    during the operation as ``embedding``)."""
    named = {f"obsmem.{key}": value for key, value in attributes.items()}
    with contextlib.ExitStack() as stack:
        stack.enter_context(calls.call_scope(thread_id=thread.id, resource_id=thread.resource_id))
        yield stack.enter_context(telemetry.span(name, {**telemetry.ids(thread.id, thread.resource_id), **named}))


# --------------------------------------------------------------------------------------------
# One cycle of model work
# --------------------------------------------------------------------------------------------

CycleKind = Literal["observation", "reflection", "buffer"]
_ID_PREFIX: dict[CycleKind, str] = {"observation": "obs", "reflection": "refl", "buffer": "buf"}
_OPERATION: dict[CycleKind, markers.OperationType] = {
    "observation": "observation",
    "reflection": "reflection",
    "buffer": "observation",
}
_WHAT: dict[CycleKind, str] = {
    "observation": "observation",
    "reflection": "reflection",
    "buffer": "buffered observation",
}


@dataclass(slots=True)
class _Log:
    """Whether a cycle's start marker was written, and whether its closing marker was."""

    opened: bool = False
    closed: bool = False


@dataclass(frozen=True, slots=True)
class Cycle:
    """One unit of model work: its id, where its markers go, its events and its time limit.

    Every marker of a cycle carries the same ``cycle_id``, operation, record and thread and
    the time it started, so a stored log reads as start → end (or failed) per cycle; the
    events a listener sees carry the same ``cycle_id``.
    """

    core: Core
    kind: CycleKind
    id: str
    thread_id: str
    record_id: str
    started_at: datetime
    target: Message | None
    log: _Log = field(default_factory=_Log, compare=False, repr=False)  # shared by replaced copies

    def now(self) -> datetime:
        return self.core.clock.now()

    async def mark(self, build: Callable[..., DataPart], **fields: Any) -> None:
        """Persist the marker ``build`` makes from this cycle's ids and ``fields``
        (``record_id`` in ``fields`` names a record other than the one the cycle began on)."""
        part = self.part(build, **fields)
        self.noted(part)
        await self.core.mark(self.target, part)

    def part(self, build: Callable[..., DataPart], **fields: Any) -> DataPart:
        """The marker :meth:`mark` would write (for one written with a record: see
        :meth:`Core.update_marking`; call :meth:`noted` once it is)."""
        base: dict[str, Any] = {
            "cycle_id": self.id,
            "operation": _OPERATION[self.kind],
            "record_id": self.record_id,
            "thread_id": self.thread_id,
            "started_at": self.started_at,
        }
        return build(**{**base, **fields})

    def noted(self, part: DataPart) -> None:
        """Note that ``part`` (one of this cycle's markers) was written: it opens or closes the cycle."""
        if part.data.get("cycle_id") == self.id:
            if part.name in markers.OPENING:
                self.log.opened = True
            elif part.name in markers.CLOSING:
                self.log.closed = True

    async def mark_failed(self, error: str, tokens_attempted: int, **fields: Any) -> None:
        """The closing marker of a cycle that did not commit."""
        build = markers.buffering_failed_marker if self.kind == "buffer" else markers.observation_failed_marker
        await self.mark(build, failed_at=self.now(), tokens_attempted=tokens_attempted, error=error, **fields)

    @contextlib.asynccontextmanager
    async def closing(self, tokens_attempted: int) -> AsyncIterator[Cycle]:
        """The cycle's work: when it ends by an exception (the model, the store, a cancellation)
        or without a result, a start marker written inside is closed with a failed marker, so a
        stored log never shows a cycle that began and never ended."""
        try:
            yield self
        except BaseException as exc:
            cancelled = isinstance(exc, asyncio.CancelledError)
            await self._close(
                "cancelled: the work was stopped (the memory closed) before it committed" if cancelled
                else describe(exc),
                tokens_attempted,
            )
            raise
        await self._close("ended without committing a result", tokens_attempted)

    async def _close(self, error: str, tokens_attempted: int) -> None:
        if not self.log.opened or self.log.closed:
            return
        try:
            await self.mark_failed(error, tokens_attempted)
        except Exception as exc:  # closing is best effort; the first error wins
            log_failure(logger, "obsmem: could not close cycle %s", self.id, error=exc, thread_id=self.thread_id,
                        operation=self.kind)

    def emit(self, kind: Any, **data: Any) -> None:
        self.core.emit(kind, self.thread_id, cycle_id=self.id, **data)

    async def run(self, work: Awaitable[T]) -> T:
        """The cycle's model call, under the engine's time limit."""
        return await self.core.timed(work, _WHAT[self.kind])


def describe(exc: BaseException) -> str:
    """An error as markers and events record it: its type and message, at most 2000 characters."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:2000]
