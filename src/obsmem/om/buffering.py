"""Buffered observation and reflection: work done early, in the background, activated instantly.

At every step the engine asks three questions, in order:

1. *Is the window over the threshold?* Then activate stored chunks (no model call) until it is
   under; if chunks run out while a buffer is still running, carry on up to ``block_after``,
   and past it observe the unbuffered tail synchronously.
2. *Are the observations over the reflection threshold?* Then activate a stored background
   reflection; above ``block_after`` with none available, reflect synchronously; otherwise start
   one in the background.
3. *Has the window crossed another buffer interval?* Then start a background observation of
   the safe prefix of the messages no chunk covers yet.

At a turn's start, buffered work may also activate early: after the actor was idle longer than
``activate_after_idle``, or when its model changed (``activate_on_provider_change``) — for
observations and, with their own options, for a buffered reflection.

Coordination is through storage only: a buffer holds a lease (so a crashed worker's buffer is
taken over once its lease expires), and every result is committed by compare-and-set on the
head record, re-read on conflict. A chunk is appended only if it continues the stored coverage
exactly (no gap, no overlap); otherwise it is dropped and its messages stay pending, which costs
a model call but never loses or duplicates a message.

This module stands on :mod:`obsmem.om.cycle` (the engine's parts, the commit loop) and
:mod:`obsmem.om.step` (the synchronous transitions it falls back to); the engine composes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from obsmem.om import markers
from obsmem.om.activation import (
    OVERTAKE_MARGIN,
    ChunkBounds,
    WindowGrowth,
    apply_buffered_reflection,
    buffer_due,
    buffer_overtaken,
    buffered_hints,
    chunk_fits,
    chunks_to_activate,
    covered_until,
    early_reflection_allowed,
    idle_expired,
    model_changed,
    reflection_slice,
    reuse_in_flight,
    threshold_action,
    usable_chunks,
)
from obsmem import telemetry
from obsmem.errors import ObsmemError
from obsmem.telemetry import log_failure
from obsmem.om.cycle import Core, Cycle, Fence, Written, traced, without_backoff
from obsmem.om.outcomes import CycleOutcome
from obsmem.om.protocols import ObservationRequest, ObservationResult, ReflectionRequest
from obsmem.om.selection import NOTHING_UNSEEN, Unseen, observable_messages, valid_cuts
from obsmem.om.step import (
    ActivateStep,
    ObserveStep,
    OtherThreads,
    ReflectStep,
    buffer_lease_key,
    observe_in_requests,
    read_other_threads,
    recent_lines,
)
from obsmem.om.text.truncation import truncate_previous_observations
from obsmem.storage import leasing
from obsmem.storage.contract import BufferedChunk, BufferedReflection, ObservationRecord, ThreadState
from obsmem.profiles import parse_model_id
from obsmem.thresholds import min_new_tokens_for_buffer, should_trigger_buffer
from obsmem.types import DataPart, Message, Thread

__all__ = ["BufferedLifecycle", "Handoff", "Paused", "Snapshot", "Spawn", "StepResult"]

logger = logging.getLogger("obsmem")

Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None] | None"]
#: Hands a due buffer to other processes instead of running it here: ``(thread, kind)`` with
#: kind "observe" or "reflect" (see :mod:`obsmem.worker`).
Handoff = Callable[[Thread, str], Awaitable[None]]
#: A buffer lease's life without renewal; see BufferedLifecycle.lease_ttl_s.
LEASE_TTL_S = 60.0
#: Lineages whose window growth (the adaptive buffer's samples) one lifecycle keeps: those
#: stepped last (each at most 16 samples, so a few MB in all), not every thread a process saw.
GROWTH_KEPT = 4096
_BUFFERED_SEPARATOR = "--- BUFFERED (pending activation) ---"
_MAX_ACTIVATION_ROUNDS = 8



@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent read: the head, and the thread's messages after its cursor."""

    record: ObservationRecord
    messages: list[Message]
    pending: int
    others: OtherThreads | None = None


async def read_snapshot(
    core: Core, thread: Thread, stored: tuple[ObservationRecord | None, list[Message]] | None = None
) -> Snapshot:
    """The head and the thread's unobserved messages, read together (one store call; see
    :meth:`~obsmem.om.cycle.Core.window` for ``stored``), and the tokens pending: the window's,
    and with sharing on the other-conversations block's (:func:`~obsmem.om.step.read_other_threads`)."""
    record, messages = await core.window(thread, stored)
    pending = core.counter.count_messages(messages) if messages else 0
    others = None
    if core.sharing:  # the other threads shown in this thread's context count toward its threshold
        others = await read_other_threads(core, thread, record)
        pending += others.block_tokens
    return Snapshot(record, messages, pending, others)


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step did, and the state after it (from which the actor's context is built)."""

    outcomes: list[CycleOutcome]
    record: ObservationRecord
    messages: list[Message]
    #: Resource scope with sharing on: the other threads as read with ``record`` (their
    #: other-conversations block counted toward the threshold); None when not read.
    others: OtherThreads | None = None


@dataclass(frozen=True, slots=True)
class Paused:
    """An inline step stopped before its first model call: what it did (``outcomes``) and
    the state it reached (``snapshot``), to go on from (``BufferedLifecycle.step(resume=...)``)."""

    snapshot: Snapshot
    outcomes: tuple[CycleOutcome, ...]


class BufferedLifecycle:
    """The buffered mode of one engine. Holds only per-instance bookkeeping of its own tasks."""

    def __init__(
        self,
        core: Core,
        *,
        observation: ObserveStep,
        activation: ActivateStep,
        reflection: ReflectStep,
        spawn: Spawn,
        handoff: Handoff | None = None,
        lease_ttl_s: float = LEASE_TTL_S,
    ) -> None:
        self.core = core
        self._lease_ttl_s = lease_ttl_s
        self.observation = observation
        self.activation = activation
        self.reflection = reflection
        self.spawn = spawn
        # With a handoff, a buffer that is due is queued for a worker rather than started here;
        # the claim (boundary compare-and-set) is then the worker's, so nothing is claimed twice.
        self.handoff = handoff
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # The buffer and reflection running per lineage: an entry goes when its task is done
        # (:meth:`_track`), so a process that sees many threads keeps only those running.
        self._observation_tasks: dict[str, asyncio.Task[None]] = {}
        self._reflection_tasks: dict[str, asyncio.Task[None]] = {}
        # Adaptive buffering, per lineage: how fast the window grows (the :data:`GROWTH_KEPT`
        # lineages stepped last; a lineage left out starts its samples again, as after a
        # restart), and the buffer in flight (when it started, on the clock, and the message
        # tokens it covers).
        self._growth: OrderedDict[str, WindowGrowth] = OrderedDict()
        self._in_flight: dict[str, tuple[float, int]] = {}  # (time.monotonic() at start, tokens)

    @property
    def lease_ttl_s(self) -> float:
        """How long a buffer lease lasts unless renewed. The holder renews it every third of
        that (:func:`~obsmem.storage.leasing.holding`) for as long as its model call runs, so a live buffer keeps
        its lease however slow the model, and a crashed process's lease is free again within
        a minute (by default) instead of after the model timeout."""
        return self._lease_ttl_s

    async def _leased(self, key: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` while holding the lease ``key`` (renewed as it runs, released at its end
        whatever ends it: see :mod:`obsmem.storage.leasing`); skip it when the lease is held elsewhere."""
        core = self.core
        if not await leasing.acquired(core.store, key, self.owner, ttl_s=self.lease_ttl_s, clock=core.clock):
            return
        async with leasing.holding(core.store, key, self.owner, ttl_s=self.lease_ttl_s, clock=core.clock):
            await work()

    # -- the step ---------------------------------------------------------------------------
    async def read(
        self, thread: Thread, stored: tuple[ObservationRecord | None, list[Message]] | None = None
    ) -> Snapshot:
        """:func:`read_snapshot` of this lifecycle's core."""
        return await read_snapshot(self.core, thread, stored)

    async def step(
        self, thread: Thread, *, turn_start: bool, actor_model: str | None, unseen: Unseen = NOTHING_UNSEEN,
        inline: bool = False, resume: Paused | None = None,
        stored: tuple[ObservationRecord | None, list[Message]] | None = None,
    ) -> StepResult | Paused:
        """One step boundary. Reads once, and re-reads only after this step wrote something, so
        an ordinary turn costs a couple of store calls (the snapshot also builds the context).
        What ``unseen`` names stays raw: it is neither activated nor observed in this step
        (buffers may start over it; they are activated at a later boundary).

        ``inline``: do everything that only reads and writes the store (early activation,
        activation rounds, starting buffers) and stop before anything that would wait on a
        model (a synchronous observation or reflection): then return :class:`Paused`, for a
        later call with ``resume=`` to go on from. A turn runs its boundaries inline and only
        the rest under its wait bound: most boundaries never reach a model, and cost no task
        hand-off. Without ``inline`` the result is always a :class:`StepResult`.

        ``stored``: the step's first read, done by the caller (a turn reads the window before
        saving its input, and adds what it saved: see :meth:`~obsmem.om.cycle.Core.window`)."""
        if resume is not None:
            outcomes, snapshot = list(resume.outcomes), resume.snapshot
        else:
            outcomes, snapshot = [], await self.read(thread, stored)
            self._note_growth(thread, snapshot)
            if turn_start:
                early, wrote = await self.early_activation(thread, actor_model, snapshot, unseen)
                outcomes.extend(early)
                if wrote:
                    snapshot = await self.read(thread)
        activations, snapshot, stopped = await self.threshold_step(thread, snapshot, unseen, inline=inline)
        outcomes.extend(activations)
        if stopped or (inline and self._reflects_now(snapshot.record)):
            return Paused(snapshot, tuple(outcomes))
        reflected = await self.reflection_step(thread, snapshot.record)
        if reflected is not None:
            outcomes.append(reflected)
            snapshot = await self.read(thread)
        await self.maybe_start_buffer(thread, idle=False, snapshot=snapshot)
        return StepResult(outcomes, snapshot.record, snapshot.messages, snapshot.others)

    def quiet(
        self, thread: Thread, snapshot: Snapshot, *, turn_start: bool, actor_model: str | None
    ) -> Callable[[], None] | None:
        """Whether :meth:`step` (``inline``) on ``snapshot`` would do nothing but note the window's
        growth: no early activation, nothing at the threshold, no reflection, no buffer to start.
        Decided from the record's numbers and this lifecycle's own bookkeeping alone (no read, no
        write, no change), so a turn can tell while its save reaches the disk; None whenever any
        of those might act (then :meth:`step` decides, as always). When quiet: what notes the
        growth as :meth:`step` would have, for the caller to call if it skips the step."""
        core = self.core
        record, pending = snapshot.record, snapshot.pending
        if turn_start and not self._early_quiet(thread, record, actor_model):
            return None
        threshold = core.message_threshold(record)
        if pending >= threshold or not self._reflection_quiet(record):
            return None
        lineage = core.lineage(thread)
        growth = self._growth_of(lineage)
        trial = WindowGrowth(growth.size, deque(growth.samples), growth.last) if growth is not None else WindowGrowth()
        trial.note(core.clock.now().timestamp(), pending)
        if self._buffer_plan(thread, snapshot, trial, idle=False, above_threshold=False) is not None:
            return None  # a buffer may start (or a backoff be reported): the step decides

        def keep() -> None:
            self._keep_growth(lineage, trial)

        return keep

    def _early_quiet(self, thread: Thread, record: ObservationRecord, actor_model: str | None) -> bool:
        """Whether :meth:`early_activation` on ``record`` does nothing, known without a read: no
        new model to remember, no provider change to act on, and no idle timeout to check (that
        reads the thread's last activity) for stored chunks or a buffered reflection."""
        config = self.core.config
        previous = record.metadata.get("last_model")
        if actor_model and previous != actor_model:
            return False
        provider, model = parse_model_id(actor_model)
        if any(c.thread_id == thread.id for c in record.buffered_chunks) and (
            (config.observation_activate_on_provider_change and self._changed(previous, actor_model))
            or (config.observation_activate_after_idle and config.observation_activation_ttl(provider, model) is not None)
        ):
            return False
        return record.buffered_reflection is None or not config.reflection_buffering_enabled or not (
            (config.reflection.activate_on_provider_change and self._changed(previous, actor_model))
            or config.reflection_activation_ttl(provider, model) is not None
        )

    def _reflection_quiet(self, record: ObservationRecord) -> bool:
        """Whether :meth:`reflection_step` on ``record`` returns at once (see :meth:`quiet`)."""
        core = self.core
        tokens = record.observation_tokens
        if tokens >= core.reflection_threshold():
            return False
        start = core.config.reflection.buffer_start_tokens
        return (
            not core.config.reflection_buffering_enabled
            or start is None
            or tokens < start
            or record.buffered_reflection is not None
        )

    def _declines_buffer(
        self, thread: Thread, snapshot: Snapshot, growth: WindowGrowth | None, *, idle: bool, above_threshold: bool
    ) -> bool:
        """Whether :meth:`_start_buffer` on ``snapshot`` stops at its first checks, which only read
        numbers (most steps stop here, before the window is scanned): no buffering, a buffer
        running, nothing to buffer, the window past the threshold, or not due yet by the window's
        ``growth`` (the adaptive interval) or else the fixed ``buffer_tokens`` one."""
        core = self.core
        buffer_tokens = core.config.observation.resolved_buffer_tokens
        running = self._observation_tasks.get(core.lineage(thread))
        if buffer_tokens is None or (running is not None and not running.done()):
            return True
        record, pending = snapshot.record, snapshot.pending
        threshold = core.message_threshold(record)
        if not snapshot.messages or (pending >= threshold and not above_threshold):
            return True
        if idle:
            return False
        boundary = record.buffer_boundary_tokens
        if boundary and pending < boundary / 2:
            boundary = 0  # the window shrank (activation elsewhere): the old boundary is stale
        # What stored chunks cover is activated at the threshold: only the rest needs a buffer.
        buffered = sum(c.message_tokens for c in record.buffered_chunks if c.thread_id == thread.id)
        due = None
        if not above_threshold and growth is not None:
            due = buffer_due(
                max(0, pending - buffered), threshold, growth.rate(), core.observer_latency.value, growth.largest_step()
            )
        if due is None:
            return not should_trigger_buffer(pending, boundary, buffer_tokens, threshold)
        return due is False  # False: a later step still lands in time, one call covers more

    async def threshold_step(
        self, thread: Thread, snapshot: Snapshot, unseen: Unseen = NOTHING_UNSEEN, *, inline: bool = False
    ) -> tuple[list[CycleOutcome], Snapshot, bool]:
        """Activate chunks until the window is under the threshold, then, if it still is not,
        wait for a running buffer or observe the unbuffered tail (see
        :func:`~obsmem.om.activation.threshold_action`). Only chunks that
        :func:`~obsmem.om.activation.usable_chunks` allows count. ``inline``: stop before the
        synchronous observation instead (the third value says it stopped)."""
        core = self.core
        observation = core.config.observation
        outcomes: list[CycleOutcome] = []
        waited = False
        for _ in range(_MAX_ACTIVATION_ROUNDS):
            record, pending = snapshot.record, snapshot.pending
            action, threshold, chunks, usable = self._threshold_action(thread, snapshot, unseen)
            if action in ("none", "wait"):
                break
            if action == "activate":
                count = chunks_to_activate(
                    [c.message_tokens for c in chunks[: max(usable, 1)]], observation.buffer_activation, threshold,
                    pending, observation.resolved_block_after,
                )
                outcome = await self.activation.activate(
                    thread, count=count, triggered_by="threshold", window=snapshot.messages, unseen=unseen,
                    head=record,
                )
                outcomes.append(outcome)
                before = (record.cursor(thread.id), len(chunks))
                snapshot = await self.read(thread)
                after = snapshot.record
                if (after.cursor(thread.id), sum(c.thread_id == thread.id for c in after.buffered_chunks)) != before:
                    continue  # it activated (or dropped broken chunks): look again
                break
            if inline:
                return outcomes, snapshot, True
            reusable = self._reusable_buffer(thread, snapshot, threshold) if not waited else None
            if reusable is not None:
                # The buffer in flight lands sooner than a new call and its chunk brings the
                # window under the threshold: wait for it (no longer than it should take; a
                # late one is overtaken after all), then activate (the next round).
                task, remaining = reusable
                waited = True
                await asyncio.wait({task}, timeout=remaining * OVERTAKE_MARGIN)
                snapshot = await self.read(thread)
                outcomes.append(
                    CycleOutcome(
                        "buffer", applied=True, record=snapshot.record, waited=True,
                        reason="waited for the buffer in flight instead of observing synchronously",
                    )
                )
                continue
            outcome = await self.observation.observe(
                thread, force=False, trigger="threshold", unseen=unseen, window=(record, snapshot.messages)
            )
            outcomes.append(outcome)
            # Read again after an observation that wrote, called a model or moved the head; one that
            # did none of these (below threshold, backing off) left the snapshot as it is.
            if outcome.applied or outcome.waited or outcome.record is not record:
                snapshot = await self.read(thread)
            break
        return outcomes, snapshot, False

    def _note_growth(self, thread: Thread, snapshot: Snapshot) -> None:
        lineage = self.core.lineage(thread)
        growth = self._growth_of(lineage)
        if growth is None:
            growth = self._keep_growth(lineage, WindowGrowth())
        growth.note(self.core.clock.now().timestamp(), snapshot.pending)

    def _growth_of(self, lineage: str) -> WindowGrowth | None:
        growth = self._growth.get(lineage)
        if growth is not None:
            self._growth.move_to_end(lineage)
        return growth

    def _keep_growth(self, lineage: str, growth: WindowGrowth) -> WindowGrowth:
        self._growth[lineage] = growth
        self._growth.move_to_end(lineage)
        while len(self._growth) > GROWTH_KEPT:
            self._growth.popitem(last=False)
        return growth

    def _track(self, tasks: dict[str, asyncio.Task[None]], lineage: str, task: asyncio.Task[None]) -> None:
        """``task`` as ``lineage``'s entry in ``tasks`` until it is done."""
        tasks[lineage] = task

        def done(finished: asyncio.Task[None]) -> None:
            if tasks.get(lineage) is finished:
                del tasks[lineage]
                if tasks is self._observation_tasks:
                    self._in_flight.pop(lineage, None)

        task.add_done_callback(done)

    def forget(self, lineages: Sequence[str]) -> None:
        """Drop what is kept of ``lineages`` (deleted): their growth samples."""
        for lineage in lineages:
            self._growth.pop(lineage, None)

    def _reusable_buffer(
        self, thread: Thread, snapshot: Snapshot, threshold: int
    ) -> tuple[asyncio.Task[None], float] | None:
        """The running buffer of ``thread``'s lineage and the real seconds it should still take,
        when :func:`~obsmem.om.activation.reuse_in_flight` says waiting for it beats a
        synchronous observation, else None. Real time: the wait is real."""
        core = self.core
        lineage = core.lineage(thread)
        task = self._observation_tasks.get(lineage)
        started = self._in_flight.get(lineage)
        latency = core.observer_latency_real.value
        if task is None or task.done() or started is None or latency is None:
            return None
        remaining = max(0.0, latency - (time.monotonic() - started[0]))
        if not reuse_in_flight(snapshot.pending, threshold, started[1], remaining, latency):
            return None
        return task, remaining

    def _reflects_now(self, record: ObservationRecord) -> bool:
        """Whether :meth:`reflection_step` on ``record`` would reflect synchronously (a model call)."""
        core = self.core
        config = core.config
        tokens = record.observation_tokens
        if tokens < core.reflection_threshold():
            return False
        if not config.reflection_buffering_enabled:
            return True
        block_after = config.reflection_block_after
        return record.buffered_reflection is None and block_after is not None and tokens >= block_after

    def _threshold_action(
        self, thread: Thread, snapshot: Snapshot, unseen: Unseen
    ) -> tuple[str, int, list[BufferedChunk], int]:
        """What the window of ``snapshot`` calls for (:func:`~obsmem.om.activation.threshold_action`),
        with the threshold, the thread's chunks and how many of them are usable now."""
        core = self.core
        record = snapshot.record
        threshold = core.message_threshold(record)
        chunks = [c for c in record.buffered_chunks if c.thread_id == thread.id]
        usable, broken_from = (
            usable_chunks(record, thread.id, ChunkBounds.of(snapshot.messages, unseen)) if chunks else (0, 0)
        )
        task = self._observation_tasks.get(core.lineage(thread))
        # Handed off to workers, a buffer is as good as in flight: give them until block_after.
        action = threshold_action(
            snapshot.pending, threshold, has_chunks=usable > 0 or broken_from < len(chunks),
            buffer_in_flight=self.handoff is not None or (task is not None and not task.done()),
            block_after=core.config.observation.resolved_block_after,
        )
        return action, threshold, chunks, usable

    # -- early activation -------------------------------------------------------------------
    async def early_activation(
        self, thread: Thread, actor_model: str | None, snapshot: Snapshot, unseen: Unseen = NOTHING_UNSEEN
    ) -> tuple[list[CycleOutcome], bool]:
        """At a turn's start: activate buffered work after idleness or when the actor's model
        changed (never over what ``unseen`` keeps raw). Returns the activations and whether
        anything was written."""
        outcomes: list[CycleOutcome] = []
        record = snapshot.record
        previous = record.metadata.get("last_model")
        remembered = False
        if actor_model and previous != actor_model:
            await self._remember_model(thread, actor_model)
            remembered = True
        if any(c.thread_id == thread.id for c in record.buffered_chunks):
            outcome = await self._early_observations(thread, actor_model, previous, snapshot.messages, unseen)
            if outcome is not None:
                outcomes.append(outcome)
        if record.buffered_reflection is not None:
            reflected = await self._early_reflection(thread, actor_model, previous)
            if reflected is not None:
                outcomes.append(reflected)
        return outcomes, remembered or any(o.applied for o in outcomes)

    def _changed(self, previous: object, actor_model: str | None) -> bool:
        if not (previous and actor_model):
            return False
        return model_changed(parse_model_id(str(previous)), parse_model_id(actor_model))

    async def _idle_s(self, thread: Thread, ttl: float | None) -> tuple[float, str] | None:
        """How long the actor has been idle and since when, if that reaches ``ttl``."""
        if ttl is None:
            return None
        last_activity = await self.core.last_activity(thread)
        if last_activity is None:
            return None
        idle_s = (self.core.clock.now() - last_activity).total_seconds()
        return (idle_s, last_activity.isoformat()) if idle_expired(idle_s, ttl) else None

    async def _early_observations(
        self, thread: Thread, actor_model: str | None, previous: object, window: list[Message], unseen: Unseen
    ) -> CycleOutcome | None:
        config = self.core.config
        if config.observation_activate_on_provider_change and self._changed(previous, actor_model):
            return await self.activation.activate(
                thread, count=None, triggered_by="provider_change",
                extra={"previous_model": previous, "current_model": actor_model}, window=window, unseen=unseen,
            )
        provider, model = parse_model_id(actor_model)
        ttl = config.observation_activation_ttl(provider, model) if config.observation_activate_after_idle else None
        idle = await self._idle_s(thread, ttl)
        if idle is None:
            return None
        return await self.activation.activate(
            thread, count=None, triggered_by="ttl",
            extra={"last_activity_at": idle[1], "ttl_expired_ms": round(idle[0] * 1000)}, window=window,
            unseen=unseen,
        )

    async def _early_reflection(
        self, thread: Thread, actor_model: str | None, previous: object
    ) -> CycleOutcome | None:
        """``reflection.activate_on_provider_change`` / ``reflection.activate_after_idle``:
        activate a stored buffered reflection below the threshold, when the guards of
        :func:`~obsmem.om.activation.early_reflection_allowed` hold. Never reflects synchronously."""
        config = self.core.config
        if not config.reflection_buffering_enabled:
            return None
        if config.reflection.activate_on_provider_change and self._changed(previous, actor_model):
            return await self.activate_reflection(thread, triggered_by="provider_change")
        provider, model = parse_model_id(actor_model)
        if await self._idle_s(thread, config.reflection_activation_ttl(provider, model)) is None:
            return None
        return await self.activate_reflection(thread, triggered_by="ttl")

    async def _remember_model(self, thread: Thread, actor_model: str) -> None:
        core = self.core

        async def compose(record: ObservationRecord) -> ObservationRecord:
            return record.model_copy(update={"metadata": {**record.metadata, "last_model": actor_model}})

        await core.commit(lambda: core.head(thread), compose, core.update)

    # -- observation buffers ----------------------------------------------------------------
    async def maybe_start_buffer(
        self, thread: Thread, *, idle: bool, snapshot: Snapshot | None = None, above_threshold: bool = False
    ) -> bool:
        """Start a background observation of the next safe run of unbuffered messages, if due.

        Past the threshold the turn itself activates or observes, so no buffer starts there,
        unless ``above_threshold``: a worker that fell behind a queue-mode application still
        buffers, and the application activates the chunk on its next step instead of observing
        synchronously at ``block_after``.

        A worker (``above_threshold``) holds the buffer lease before it asks: its reservation
        on the head can only lose to a write by another engine that does not run this buffer
        (an application's step, or its reservation, whose buffer then finds the lease held and
        skips), so it reads again and retries, rather than leave the messages unbuffered.
        """
        for _ in range(3 if above_threshold else 1):
            started = await self._start_buffer(thread, idle=idle, snapshot=snapshot, above_threshold=above_threshold)
            if started is not None:
                return started
            snapshot = None  # the reservation lost a compare-and-set: read the head again
        return False

    async def _start_buffer(
        self, thread: Thread, *, idle: bool, snapshot: Snapshot | None, above_threshold: bool
    ) -> bool | None:
        """:meth:`maybe_start_buffer` once: None when the reservation lost its compare-and-set."""
        core = self.core
        buffer_tokens = core.config.observation.resolved_buffer_tokens
        lineage = core.lineage(thread)
        running = self._observation_tasks.get(lineage)
        if buffer_tokens is None or (running is not None and not running.done()):
            return False  # (before the read)
        snapshot = snapshot or await self.read(thread)
        plan = self._buffer_plan(thread, snapshot, self._growth_of(lineage), idle=idle, above_threshold=above_threshold)
        if plan is None:
            return False
        safe, new_tokens = plan
        record, pending = snapshot.record, snapshot.pending
        if core.backing_off(record, "observation", thread.id) is not None:
            return False  # the observer keeps failing: no buffer (nor a worker's) until its backoff ends
        if self.handoff is not None:
            await self.handoff(thread, "observe")
            return False
        # Claim the interval in storage so no other engine starts the same buffer. A worker
        # claims here (it retries a lost claim); a turn leaves the claim to the buffer's task,
        # so a boundary that starts a buffer makes no write (a lost claim there just means
        # another engine buffers these messages, or the next boundary looks again).
        if above_threshold:
            claim = await core.update(record, record.model_copy(update={"buffer_boundary_tokens": pending}))
            if claim.status != "applied":
                return None
            task = self.spawn(self._run_buffer(thread, safe, Fence.of(record, core.clock.now()), pending),
                              f"buffer:{lineage}")  # fmt: skip
        else:
            task = self.spawn(self._claim_and_run_buffer(thread, record, safe, pending), f"buffer:{lineage}")
        if task is not None:
            self._in_flight[lineage] = (time.monotonic(), new_tokens)
            self._track(self._observation_tasks, lineage, task)
        return task is not None

    def _buffer_plan(
        self, thread: Thread, snapshot: Snapshot, growth: WindowGrowth | None, *, idle: bool, above_threshold: bool
    ) -> tuple[list[Message], int] | None:
        """What :meth:`_start_buffer` would buffer from ``snapshot`` (the safe run of unbuffered
        messages and its tokens), or None where it stops before its backoff check: declined by
        :meth:`_declines_buffer`, no safe cut, too little new, or overtaken (by ``growth``, the
        window's growth as noted at this step). Pure: it reads numbers and the snapshot only, so
        :meth:`quiet` asks it too (a step that would only decline a buffer is quiet)."""
        core = self.core
        if self._declines_buffer(thread, snapshot, growth, idle=idle, above_threshold=above_threshold):
            return None
        record, pending = snapshot.record, snapshot.pending
        covered = covered_until(record, thread.id)
        candidates = [m for m in snapshot.messages if (m.seq or 0) > covered]
        cuts = valid_cuts(candidates)
        if not cuts:
            return None
        safe = candidates[: cuts[-1]]
        new_tokens = sum(core.counter.count_message(m) for m in safe)
        if not idle:
            buffer_tokens = core.config.observation.resolved_buffer_tokens
            if buffer_tokens is None or new_tokens < min_new_tokens_for_buffer(buffer_tokens):
                return None
            if not above_threshold and self._overtaken(growth, pending, core.message_threshold(record)):
                return None  # a synchronous observation would overtake it: not worth a call
        return safe, new_tokens

    def _overtaken(self, growth: WindowGrowth | None, pending: int, threshold: int) -> bool:
        """Whether a buffer started now would be overtaken by a synchronous observation (at
        ``block_after``, or at the threshold without one), by the window's ``growth`` and this
        engine's observer latency (:func:`~obsmem.om.activation.buffer_overtaken`)."""
        block_at = self.core.config.observation.resolved_block_after or threshold
        rate = growth.rate() if growth is not None else None
        return buffer_overtaken(pending, rate, self.core.observer_latency.value, block_at)

    async def _claim_and_run_buffer(
        self, thread: Thread, record: ObservationRecord, messages: list[Message], window: int
    ) -> None:
        """:meth:`_run_buffer` once the interval is claimed over ``record`` (compare-and-set);
        nothing when the claim is lost or fails (the messages stay pending)."""
        try:
            claim = await self.core.update(record, record.model_copy(update={"buffer_boundary_tokens": window}))
        except ObsmemError as exc:
            log_failure(logger, "obsmem: could not claim a buffer of %s", thread.id, error=exc,
                        thread_id=thread.id, operation="buffer")
            return
        if claim.status == "applied":
            await self._run_buffer(thread, messages, Fence.of(record, self.core.clock.now()), window)

    async def _run_buffer(self, thread: Thread, messages: list[Message], fence: Fence, window: int = 0) -> None:
        """Buffer ``messages``, read under ``fence`` (see :data:`~obsmem.om.cycle.ERASURES_KEY`:
        the fence of the record read with them, or before)."""
        key = buffer_lease_key(self.core.lineage(thread))

        async def work() -> None:
            await self._buffer(thread, messages, fence, window)
            if self.core.resource_scope:
                await self._buffer_others(thread)

        await self._leased(key, work)

    async def _buffer_others(self, thread: Thread) -> None:
        """Resource scope: the other threads that are due join this buffer's cycle, observed
        and committed with their cursors (:meth:`~obsmem.om.step.ObserveStep.observe_others`;
        with sharing on, only those with at least a buffer interval unobserved, so a buffer
        never makes a call for a sibling's last few messages). Never raises: the messages stay
        pending."""
        core = self.core
        buffer_tokens = core.config.observation.resolved_buffer_tokens or 1
        try:
            record = await core.head(thread)
            minimum = min_new_tokens_for_buffer(buffer_tokens) if core.sharing else None
            await self.observation.observe_others(thread, record, minimum=minimum)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log_failure(logger, "obsmem: observing the other threads of %s failed", thread.id, error=exc,
                        thread_id=thread.id, operation="buffer")

    async def _buffer(self, thread: Thread, messages: list[Message], fence: Fence, window: int = 0) -> None:
        """Observe ``messages`` into a chunk (under the buffer's lease) and append it. A buffer
        failure never reaches the actor: the messages stay pending, and a start marker it wrote
        is always closed (failed, cancelled, or dropped at landing)."""
        with traced("obsmem.buffer", thread, kind="observation", window_tokens=window) as span:
            await self._buffer_now(thread, messages, fence, window, span)

    async def _buffer_now(
        self, thread: Thread, messages: list[Message], fence: Fence, window: int, span: telemetry.Span
    ) -> None:
        core = self.core
        cycle = core.cycle("buffer", thread, None, None)
        message_tokens = sum(core.counter.count_message(m) for m in messages)
        try:
            record = await core.head(thread)
        except Exception as exc:  # the store failed: nothing began, nothing to close
            span.fail(exc)
            span.set("obsmem.outcome", "failed")
            await self._buffer_failed(cycle, thread, exc, message_tokens, calling=False)
            return
        if not fence.holds(record):  # a forget ran when or since the messages were read
            span.set("obsmem.outcome", "changed by a forget")
            return
        # Another engine may have buffered or observed some of these while we waited for the
        # lease: observe only what is still uncovered, or nothing.
        covered = covered_until(record, thread.id)
        messages = [m for m in messages if (m.seq or 0) > covered]
        if not messages:
            span.set("obsmem.outcome", "already covered")
            return
        message_tokens = sum(core.counter.count_message(m) for m in messages)
        cycle = dataclasses.replace(cycle, record_id=record.id, target=markers.marker_target(messages))
        calling = False
        async with cycle.closing(message_tokens):
            try:
                await cycle.mark(
                    markers.buffering_start_marker, tokens_to_buffer=message_tokens, config=core.marker_config(record)
                )
                # window_tokens: the unobserved window when the buffer was claimed (benchmarks
                # count buffers thrown away that started past the threshold).
                cycle.emit("buffer-start", tokens=message_tokens, window_tokens=window)
                counts = [core.counter.count_message(m) for m in messages]

                def request(group: list[Message], earlier: ObservationResult | None) -> ObservationRequest:
                    return self._buffer_request(thread, record, group, cycle, earlier)

                span.update({"obsmem.messages": len(messages), "obsmem.input_tokens": message_tokens})
                calling = True
                result = await observe_in_requests(core, cycle, messages, counts, request)
                calling = False
                chunk = BufferedChunk(
                    id=f"chunk_{uuid.uuid4().hex}", cycle_id=cycle.id, thread_id=thread.id,
                    observations=core.package(thread, messages, result.observations),
                    observation_tokens=core.counter.count_text(result.observations),
                    message_ids=tuple(m.id for m in messages), message_tokens=message_tokens,
                    first_seq=messages[0].seq or 0, last_seq=messages[-1].seq or 0,
                    created_at=messages[-1].created_at, extracted=dict(result.extracted),
                    current_task=result.current_task, suggested_response=result.suggested_response,
                )
                span.set("obsmem.output_tokens", chunk.observation_tokens)
                landed = await self._land(cycle, thread, chunk, fence, window)
                span.set("obsmem.outcome", "landed" if landed else "dropped")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                span.fail(exc)
                span.set("obsmem.outcome", "failed")
                await self._buffer_failed(cycle, thread, exc, message_tokens, calling=calling)

    async def _buffer_failed(
        self, cycle: Cycle, thread: Thread, exc: Exception, message_tokens: int, *, calling: bool
    ) -> None:
        """Report a failed buffer and close its cycle; the messages stay pending."""
        log_failure(logger, "obsmem: buffered observation of thread %s failed", thread.id, error=exc,
                    thread_id=thread.id, operation="buffer")
        cycle.emit("buffer-failed", error=str(exc))
        await cycle.mark_failed(f"{type(exc).__name__}: {exc}", message_tokens, record_id="")
        if calling:  # the observer failed (not the store): it backs off, for every process
            await self.core.back_off(thread, "observation", exc)

    async def _land(self, cycle: Cycle, thread: Thread, chunk: BufferedChunk, fence: Fence, window: int = 0) -> bool:
        """Append a finished chunk (its end marker with it), index it (or report it dropped: False)."""
        core = self.core
        stored = await self._append_chunk(thread, chunk, fence, cycle)
        if stored is None:
            cycle.emit("buffer-dropped", window_tokens=window)
            return False
        await core.reindex(thread, "", chunk.observations)
        cycle.emit("buffer-end", tokens=chunk.message_tokens, output_tokens=chunk.observation_tokens)
        return True

    def _buffer_request(
        self,
        thread: Thread,
        record: ObservationRecord,
        messages: list[Message],
        cycle: Cycle,
        earlier: ObservationResult | None = None,
    ) -> ObservationRequest:
        """A buffer's request; ``earlier`` is what this buffer's previous requests returned."""
        core = self.core
        chunks = [c.observations for c in record.buffered_chunks if c.thread_id == thread.id and c.observations]
        previous = core.observer_view(record.active_observations, thread)
        chunks = [core.observer_view(c, thread) for c in chunks]
        if earlier is not None and earlier.observations.strip():
            chunks.append(recent_lines(earlier.observations))
        if chunks:
            previous = "\n\n".join([previous, _BUFFERED_SEPARATOR, *chunks]).strip()
        budget = core.config.observation.previous_observer_tokens
        truncated = truncate_previous_observations(
            previous, None if budget is False else int(budget), core.counter.count_text
        )
        state = record.threads.get(thread.id, ThreadState())
        hints = core.config.observation.continuation_hints
        # the hints as of the buffer's first message: the newest chunk's, else the thread's
        task, suggested = buffered_hints(record, thread.id, state)
        if earlier is not None and earlier.current_task:
            task, suggested = earlier.current_task, earlier.suggested_response
        return ObservationRequest(
            messages=messages,
            previous_observations=truncated.text,
            previous_truncated=truncated.truncated,
            current_task=task if hints else None,
            suggested_response=suggested if hints else None,
            thread_title=thread.title or state.thread_title,
            extracted={**state.extracted, **(earlier.extracted if earlier else {})},
            extractors=core.extractors,
            continuation_hints=hints,
            want_title=False,
            buffered=True,
            timezone=core.timezone,
            now=cycle.started_at,
            thread_id=thread.id,
            resource_id=thread.resource_id,
            instruction=core.config.observation.instruction,
        )

    async def _append_chunk(
        self, thread: Thread, chunk: BufferedChunk, fence: Fence, cycle: Cycle
    ) -> ObservationRecord | None:
        """Append ``chunk`` to the stored head if it continues the coverage exactly and no forget
        ran when or since its messages were read (``fence``); its end marker (which
        quotes the chunk) goes in the same write where the store can, so a forget fenced later
        finds both and one fenced earlier finds neither."""
        core = self.core
        end: DataPart | None = None

        async def compose(record: ObservationRecord) -> ObservationRecord | None:
            if not fence.holds(record):
                return None  # the chunk may hold what a forget erased: dropped, the messages stay pending
            # The thread the chunk's messages came from, still: deleted and begun again under its
            # id meanwhile (read after the head, so a delete between the two is seen here or
            # makes the write fail), the chunk is the deleted conversation's. Its positions are
            # all before the new thread's, so the coverage check below would take it.
            current = await core.store.get_thread(thread.id)
            if current is None or (current.created_at, current.resource_id, current.org_id) != (
                thread.created_at, thread.resource_id, thread.org_id
            ):
                return None
            covered = covered_until(record, thread.id)
            if covered >= chunk.last_seq:
                return None  # everything it covers was observed or buffered meanwhile
            between: list[Message] = []
            if chunk.first_seq > covered + 1:
                stored = await core.store.list_messages(thread.id, after_seq=covered, before_seq=chunk.first_seq)
                between = observable_messages(stored)
            if not chunk_fits(record, chunk, between):
                return None
            return record.model_copy(
                update={
                    "buffered_chunks": (*record.buffered_chunks, chunk),
                    "metadata": without_backoff(record.metadata, "observation"),
                    "updated_at": core.clock.now(),
                }
            )

        async def write(record: ObservationRecord, proposed: ObservationRecord) -> Written[ObservationRecord]:
            nonlocal end
            end = cycle.part(
                markers.buffering_end_marker, record_id=proposed.id, completed_at=cycle.now(),
                tokens_buffered=chunk.message_tokens,
                buffered_tokens=sum(c.observation_tokens for c in proposed.buffered_chunks),
                observations=chunk.observations or None,
            )  # fmt: skip
            return await core.update_marking(record, proposed, cycle.target, [end])

        done = await core.commit(lambda: core.stored_head(thread), compose, write)
        if not done.applied:
            return None
        if end is not None:
            cycle.noted(end)
        return done.current

    # -- reflection ---------------------------------------------------------------------------
    async def reflection_step(self, thread: Thread, record: ObservationRecord) -> CycleOutcome | None:
        core = self.core
        config = core.config
        threshold = core.reflection_threshold()
        if not config.reflection_buffering_enabled:
            if record.observation_tokens < threshold:
                return None
            return _reported(await self.reflection.maybe_reflect(thread))
        tokens = record.observation_tokens
        if tokens >= threshold:
            if record.buffered_reflection is not None:
                return await self.activate_reflection(thread)
            block_after = config.reflection_block_after
            if block_after is not None and tokens >= block_after:
                return _reported(await self.reflection.maybe_reflect(thread))
            await self.maybe_start_reflection(thread, record)
            return None
        start = config.reflection.buffer_start_tokens
        if start is not None and tokens >= start and record.buffered_reflection is None:
            await self.maybe_start_reflection(thread, record)
        return None

    async def activate_reflection(
        self, thread: Thread, *, triggered_by: str = "threshold"
    ) -> CycleOutcome | None:
        """Make the stored buffered reflection the next generation (None when there is none, or
        when an early trigger's guards do not hold on the stored head)."""
        with traced("obsmem.activate", thread, trigger=triggered_by, kind="reflection") as span:
            outcome = await self._activate_reflection(thread, triggered_by)
            if outcome is None:
                span.update({"obsmem.applied": False, "obsmem.outcome": "not activated"})
            else:
                telemetry.record_outcome(span, outcome)
            return outcome

    async def _activate_reflection(self, thread: Thread, triggered_by: str) -> CycleOutcome | None:
        core = self.core
        early = triggered_by != "threshold"
        buffer_activation = core.config.reflection.buffer_activation or 0.5

        async def compose(record: ObservationRecord) -> ObservationRecord | None:
            if early and not early_reflection_allowed(
                record, core.reflection_threshold(), buffer_activation, core.counter.count_text
            ):
                return None
            return apply_buffered_reflection(
                record, new_id=f"omr_{uuid.uuid4().hex}", now=core.clock.now(), count_tokens=core.counter.count_text
            )

        done = await core.commit(lambda: core.head(thread), compose, core.new_generation)
        if not done.applied or done.current is None or done.base is None:
            return None
        stored, base = done.current, done.base
        await core.reindex(thread, base.active_observations, stored.active_observations)
        extra = {"triggered_by": triggered_by} if early else {}
        core.emit("reflection-activated", thread.id, generation=stored.generation,
                  tokens=base.observation_tokens, output_tokens=stored.observation_tokens, **extra)
        return CycleOutcome(
            "reflection", True, stored, input_tokens=base.observation_tokens, output_tokens=stored.observation_tokens
        )

    async def maybe_start_reflection(self, thread: Thread, record: ObservationRecord) -> bool:
        core = self.core
        lineage = core.lineage(thread)
        running = self._reflection_tasks.get(lineage)
        if running is not None and not running.done():
            return False
        if record.buffered_reflection is not None or record.reflection_boundary_tokens == record.observation_tokens:
            return False
        if core.backing_off(record, "reflection", thread.id) is not None:
            return False
        if self.handoff is not None:
            await self.handoff(thread, "reflect")
            return False
        claim = await core.update(
            record, record.model_copy(update={"reflection_boundary_tokens": record.observation_tokens})
        )
        if claim.status != "applied" or claim.current is None:
            return False
        task = self.spawn(self._run_reflection(thread, claim.current), f"reflect:{lineage}")
        if task is not None:
            self._track(self._reflection_tasks, lineage, task)
        return task is not None

    async def _run_reflection(self, thread: Thread, record: ObservationRecord) -> None:
        key = leasing.lineage_lease(leasing.BUFFER_REFLECTION, self.core.lineage(thread))
        await self._leased(key, lambda: self._reflect(thread, record))

    async def _reflect(self, thread: Thread, record: ObservationRecord) -> None:
        """Condense the leading slice of ``record``'s observations (under the lease) and store
        the result on the head, if the head still begins with that slice."""
        with traced(
            "obsmem.buffer", thread, kind="reflection", generation=record.generation
        ) as span:
            await self._reflect_now(thread, record, span)

    async def _reflect_now(self, thread: Thread, record: ObservationRecord, span: telemetry.Span) -> None:
        core = self.core
        config = core.config
        calling = False
        try:
            budget = core.reflection_threshold() * (config.reflection.buffer_activation or 0.5)
            # Resource scope: the slice is whole thread sections (the reflector condenses each
            # section on its own, and the successor keeps every line in its thread's section).
            text, line_count = reflection_slice(
                record.active_observations, record.observation_tokens, budget, sections=core.resource_scope
            )
            if not text.strip():
                span.set("obsmem.outcome", "nothing to reflect")
                return
            input_tokens = core.counter.count_text(text)
            span.set("obsmem.input_tokens", input_tokens)
            telemetry.record_buffer_started("reflection")
            zone = await core.reflection_zone(thread, record)
            request = ReflectionRequest(
                observations=text,
                target_tokens=max(1, round(0.75 * input_tokens)),
                start_level=core.reflector_start_level,
                extractors=core.extractors,
                continuation_hints=False,
                now=core.clock.now(),
                instruction=config.reflection.instruction,
                thread_id=None if core.resource_scope else thread.id,
                resource_id=thread.resource_id,
                timezone=zone,
            )
            calling = True
            result = await core.timed(core.reflector.reflect(request), "buffered reflection")
            if not result.observations.strip():
                raise ValueError("the reflector returned empty output")
            calling = False
            buffered = BufferedReflection(
                cycle_id=markers.new_cycle_id("rbuf"), text=result.observations.strip(),
                tokens=core.counter.count_text(result.observations), input_tokens=input_tokens,
                line_count=line_count, created_at=core.clock.now(),
            )
            span.set("obsmem.output_tokens", buffered.tokens)
            if await self._store_reflection(thread, record, text, buffered):
                span.set("obsmem.outcome", "stored")
                core.emit("reflection-buffered", thread.id, tokens=input_tokens, output_tokens=buffered.tokens)
            else:
                span.set("obsmem.outcome", "dropped")
                telemetry.record_event("buffer-dropped-reflection", {})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the boundary stays, so the same input is not retried in a loop
            span.fail(exc)
            span.set("obsmem.outcome", "failed")
            log_failure(logger, "obsmem: buffered reflection of thread %s failed", thread.id, error=exc,
                        thread_id=thread.id, operation="buffered-reflection")
            core.emit("reflection-failed", thread.id, error=str(exc))
            if calling:
                await core.back_off(thread, "reflection", exc)

    async def _store_reflection(
        self, thread: Thread, record: ObservationRecord, text: str, buffered: BufferedReflection
    ) -> bool:
        core = self.core

        async def compose(head: ObservationRecord) -> ObservationRecord | None:
            if head.id != record.id or head.buffered_reflection is not None:
                return None  # a new generation or another buffer won; this slice no longer applies
            if not head.active_observations.startswith(text):
                return None
            metadata = without_backoff(head.metadata, "reflection")
            return head.model_copy(update={"buffered_reflection": buffered, "metadata": metadata})

        return (await core.commit(lambda: core.stored_head(thread), compose, core.update)).applied


def _reported(outcome: CycleOutcome) -> CycleOutcome | None:
    """A synchronous reflection's outcome when the step reports it: it wrote, or it failed."""
    return outcome if outcome.applied or outcome.error is not None else None

