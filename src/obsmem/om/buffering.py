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

Coordination is through storage only: a buffer holds a lease (so a crashed worker's buffer is
taken over once its lease expires), and every result is committed by compare-and-set on the
head record, re-read on conflict. A chunk is appended only if it continues the stored coverage
exactly (no gap, no overlap); otherwise it is dropped and its messages stay pending, which costs
a model call but never loses or duplicates a message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from obsmem.om import markers
from obsmem.om.activation import apply_buffered_reflection, chunk_fits, covered_until, reflection_slice
from obsmem.om.outcomes import CycleOutcome
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.om.selection import observable_messages, valid_cuts
from obsmem.om.text.truncation import truncate_previous_observations
from obsmem.storage.contract import BufferedChunk, BufferedReflection, ObservationRecord, ThreadState
from obsmem.thresholds import (
    min_new_tokens_for_buffer,
    normalize_provider,
    select_activation_prefix,
    should_trigger_buffer,
)
from obsmem.types import Message, Thread

if TYPE_CHECKING:
    from obsmem.om.engine import Engine

__all__ = ["BufferedLifecycle", "Snapshot", "Spawn", "StepResult", "split_model_id"]

logger = logging.getLogger("obsmem")

Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None] | None"]
#: Hands a due buffer to other processes instead of running it here: ``(thread, kind)`` with
#: kind "observe" or "reflect" (see :mod:`obsmem.worker`).
Handoff = Callable[[Thread, str], Awaitable[None]]
#: A buffer lease's life without renewal; see BufferedLifecycle.lease_ttl_s.
LEASE_TTL_S = 60.0
_BUFFERED_SEPARATOR = "--- BUFFERED (pending activation) ---"
_MAX_ACTIVATION_ROUNDS = 8


def split_model_id(model_id: str | None) -> tuple[str, str]:
    """``"openai:gpt-4o"`` / ``"openai/gpt-4o"`` / ``"openai.responses:gpt-4o"`` → (provider, model)."""
    if not model_id:
        return "", ""
    for separator in (":", "/"):
        if separator in model_id:
            provider, model = model_id.split(separator, 1)
            return normalize_provider(provider), model
    return "", model_id


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent read: the head, and the thread's messages after its cursor."""

    record: ObservationRecord
    messages: list[Message]
    pending: int


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step did, and the state after it (from which the actor's context is built)."""

    outcomes: list[CycleOutcome]
    record: ObservationRecord
    messages: list[Message]


class BufferedLifecycle:
    """The buffered mode of one engine. Holds only per-instance bookkeeping of its own tasks."""

    def __init__(self, engine: Engine, spawn: Spawn, handoff: Handoff | None = None) -> None:
        self.engine = engine
        self.spawn = spawn
        # With a handoff, a buffer that is due is queued for a worker rather than started here;
        # the claim (boundary compare-and-set) is then the worker's, so nothing is claimed twice.
        self.handoff = handoff
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._observation_tasks: dict[str, asyncio.Task[None]] = {}
        self._reflection_tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def lease_ttl_s(self) -> float:
        """How long a buffer lease lasts unless renewed. The holder renews it every third of
        that (:meth:`_heartbeat`) for as long as its model call runs, so a live buffer keeps
        its lease however slow the model, and a crashed process's lease is free again within
        a minute instead of after the model timeout."""
        return LEASE_TTL_S

    async def _heartbeat(self, key: str) -> None:
        """Renew ``key`` until cancelled or lost. Real time on purpose: the lease guards work
        happening now, and a virtual clock in tests must not spin this loop."""
        while True:
            await asyncio.sleep(self.lease_ttl_s / 3)
            renewed = await self.engine.store.renew_lease(
                key, self.owner, ttl_s=self.lease_ttl_s, now=self.engine.clock.now()
            )
            if renewed is None:  # lost (expired meanwhile, or taken over): the CAS guards the rest
                return

    def _start_heartbeat(self, key: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._heartbeat(key), name=f"obsmem:lease:{key}")

    @staticmethod
    async def _stop_heartbeat(beat: asyncio.Task[None]) -> None:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)

    # -- the step ---------------------------------------------------------------------------
    async def read(self, thread: Thread) -> Snapshot:
        """The head and the thread's unobserved messages, read together (two store calls)."""
        engine = self.engine
        record = await engine.head(thread)
        messages = await engine.unobserved(record, thread.id)
        return Snapshot(record, messages, engine.counter.count_messages(messages) if messages else 0)

    async def step(self, thread: Thread, *, turn_start: bool, actor_model: str | None) -> StepResult:
        """One step boundary. Reads once, and re-reads only after this step wrote something, so
        an ordinary turn costs a couple of store calls (the snapshot also builds the context)."""
        outcomes: list[CycleOutcome] = []
        snapshot = await self.read(thread)
        if turn_start:
            early, wrote = await self.early_activation(thread, actor_model, snapshot.record)
            if early is not None:
                outcomes.append(early)
            if wrote:
                snapshot = await self.read(thread)
        activations, snapshot = await self.threshold_step(thread, snapshot)
        outcomes.extend(activations)
        reflected = await self.reflection_step(thread, snapshot.record)
        if reflected is not None:
            outcomes.append(reflected)
            snapshot = await self.read(thread)
        await self.maybe_start_buffer(thread, idle=False, snapshot=snapshot)
        return StepResult(outcomes, snapshot.record, snapshot.messages)

    async def threshold_step(self, thread: Thread, snapshot: Snapshot) -> tuple[list[CycleOutcome], Snapshot]:
        """Activate chunks until the window is under the threshold.

        With no chunk left but a buffer in flight, the turn does not block while the window is
        under ``block_after``: the buffer lands and activates on a later step. At or above
        ``block_after`` (or with nothing in flight) the unbuffered tail is observed synchronously
        right away, down to the retention floor. Waiting for the running buffer instead would
        gain only the one chunk it covers and block again a few turns later; a buffer whose
        messages get observed meanwhile is simply dropped when it lands.
        """
        engine = self.engine
        outcomes: list[CycleOutcome] = []
        block_after = engine.config.observation.resolved_block_after
        for _ in range(_MAX_ACTIVATION_ROUNDS):
            record, pending = snapshot.record, snapshot.pending
            threshold = engine.message_threshold(record)
            if pending < threshold:
                break
            chunks = [c for c in record.buffered_chunks if c.thread_id == thread.id]
            if chunks:
                count = self._activation_count(record, chunks, pending, threshold)
                outcomes.append(await engine.activate(thread, count=count, triggered_by="threshold"))
                snapshot = await self.read(thread)
                continue
            task = self._observation_tasks.get(engine.lineage(thread))
            # Handed off to workers, a buffer is as good as in flight: give them until block_after.
            in_flight = self.handoff is not None or (task is not None and not task.done())
            if in_flight and block_after is not None and pending < block_after:
                break  # the running buffer will bring the window down; no need to block on it
            outcomes.append(await engine.observe(thread, force=False, trigger="threshold"))
            snapshot = await self.read(thread)
            break
        return outcomes, snapshot

    def _activation_count(
        self, record: ObservationRecord, chunks: list[BufferedChunk], pending: int, threshold: int
    ) -> int:
        observation = self.engine.config.observation
        block_after = observation.resolved_block_after
        force = block_after is not None and pending >= block_after
        return select_activation_prefix(
            [c.message_tokens for c in chunks], observation.buffer_activation, threshold, pending, force_max=force
        )

    # -- early activation -------------------------------------------------------------------
    async def early_activation(
        self, thread: Thread, actor_model: str | None, record: ObservationRecord
    ) -> tuple[CycleOutcome | None, bool]:
        """At a turn's start: activate chunks after idleness or when the actor's model changed.

        Returns the activation (if any) and whether anything was written.
        """
        outcome, remembered = None, False
        previous = record.metadata.get("last_model")
        if actor_model and previous != actor_model:
            await self._remember_model(thread, actor_model)
            remembered = True
        if any(c.thread_id == thread.id for c in record.buffered_chunks):
            outcome = await self._early_activation(thread, actor_model, previous)
        return outcome, remembered or (outcome is not None and outcome.applied)

    async def _early_activation(
        self, thread: Thread, actor_model: str | None, previous: object
    ) -> CycleOutcome | None:
        engine = self.engine
        config = engine.config
        provider, model = split_model_id(actor_model)
        if config.observation_activate_on_provider_change and previous and actor_model:
            old_provider, old_model = split_model_id(str(previous))
            if old_model != model or (old_provider and provider and old_provider != provider):
                return await engine.activate(
                    thread, count=None, triggered_by="provider_change",
                    extra={"previous_model": previous, "current_model": actor_model},
                )
        ttl = config.observation_activation_ttl(provider, model) if config.observation_activate_after_idle else None
        if ttl is None:
            return None
        last_activity = await self._last_activity(thread)
        if last_activity is None:
            return None
        idle_s = (engine.clock.now() - last_activity).total_seconds()
        if idle_s < ttl:
            return None
        return await engine.activate(
            thread, count=None, triggered_by="ttl",
            extra={"last_activity_at": last_activity.isoformat(), "ttl_expired_ms": round(idle_s * 1000)},
        )

    async def _last_activity(self, thread: Thread) -> datetime | None:
        recent = await self.engine.store.list_messages(thread.id, limit=50, newest_first=True)
        return next((m.created_at for m in recent if m.role == "assistant"), None)

    async def _remember_model(self, thread: Thread, actor_model: str) -> None:
        engine = self.engine
        for _ in range(3):
            record = await engine.head(thread)
            updated = record.model_copy(update={"metadata": {**record.metadata, "last_model": actor_model}})
            write = await engine.store.update_record(updated, expected_version=record.version)
            if write.applied or write.status == "gone":
                return

    # -- observation buffers ----------------------------------------------------------------
    async def maybe_start_buffer(
        self, thread: Thread, *, idle: bool, snapshot: Snapshot | None = None, above_threshold: bool = False
    ) -> bool:
        """Start a background observation of the next safe run of unbuffered messages, if due.

        Past the threshold the turn itself activates or observes, so no buffer starts there,
        unless ``above_threshold``: a worker that fell behind a queue-mode application still
        buffers, and the application activates the chunk on its next step instead of observing
        synchronously at ``block_after``.
        """
        engine = self.engine
        observation = engine.config.observation
        buffer_tokens = observation.resolved_buffer_tokens
        if buffer_tokens is None:
            return False
        lineage = engine.lineage(thread)
        running = self._observation_tasks.get(lineage)
        if running is not None and not running.done():
            return False
        snapshot = snapshot or await self.read(thread)
        record, messages, pending = snapshot.record, snapshot.messages, snapshot.pending
        if not messages:
            return False
        threshold = engine.message_threshold(record)
        if pending >= threshold and not above_threshold:
            return False
        covered = covered_until(record, thread.id)
        candidates = [m for m in messages if (m.seq or 0) > covered]
        cuts = valid_cuts(candidates)
        if not cuts:
            return False
        safe = candidates[: cuts[-1]]
        new_tokens = sum(engine.counter.count_message(m) for m in safe)
        boundary = record.buffer_boundary_tokens
        if boundary and pending < boundary / 2:
            boundary = 0  # the window shrank (activation elsewhere): the old boundary is stale
        if not idle:
            if not should_trigger_buffer(pending, boundary, buffer_tokens, threshold):
                return False
            if new_tokens < min_new_tokens_for_buffer(buffer_tokens):
                return False
        if self.handoff is not None:
            await self.handoff(thread, "observe")
            return False
        # Claim the interval in storage so no other engine starts the same buffer.
        write = await engine.store.update_record(
            record.model_copy(update={"buffer_boundary_tokens": pending}), expected_version=record.version
        )
        if not write.applied:
            return False
        task = self.spawn(self._run_buffer(thread, safe, new_tokens), f"buffer:{lineage}")
        if task is not None:
            self._observation_tasks[lineage] = task
        return task is not None

    async def _run_buffer(self, thread: Thread, messages: list[Message], message_tokens: int) -> None:
        engine = self.engine
        lineage = engine.lineage(thread)
        key = f"buffer-observation:{lineage}"
        lease = await engine.store.acquire_lease(key, self.owner, ttl_s=self.lease_ttl_s, now=engine.clock.now())
        if lease is None:
            return
        beat = self._start_heartbeat(key)
        cycle_id = markers.new_cycle_id("buf")
        started_at = engine.clock.now()
        target = None
        try:
            record = await engine.head(thread)
            # Another engine may have buffered or observed some of these while we waited for
            # the lease: observe only what is still uncovered, or nothing.
            covered = covered_until(record, thread.id)
            messages = [m for m in messages if (m.seq or 0) > covered]
            if not messages:
                return
            message_tokens = sum(engine.counter.count_message(m) for m in messages)
            target = markers.marker_target(messages)
            await engine._mark(
                target,
                markers.buffering_start_marker(
                    cycle_id=cycle_id, operation="observation", record_id=record.id, thread_id=thread.id,
                    started_at=started_at, tokens_to_buffer=message_tokens, config=engine._marker_config(record),
                ),
            )
            engine._emit("buffer-start", thread.id, cycle_id=cycle_id, tokens=message_tokens)
            request = self._buffer_request(thread, record, messages, started_at)
            result = await engine._timed(engine.observer.observe(request), "buffered observation")
            output_tokens = engine.counter.count_text(result.observations)
            chunk = BufferedChunk(
                id=f"chunk_{uuid.uuid4().hex}", cycle_id=cycle_id, thread_id=thread.id,
                observations=engine.package(thread, messages, result.observations),
                observation_tokens=output_tokens,
                message_ids=tuple(m.id for m in messages), message_tokens=message_tokens,
                first_seq=messages[0].seq or 0, last_seq=messages[-1].seq or 0,
                created_at=messages[-1].created_at, extracted=dict(result.extracted),
            )
            stored = await self._append_chunk(thread, chunk)
            if stored is None:
                engine._emit("buffer-dropped", thread.id, cycle_id=cycle_id)
                return
            await engine.reindex(thread.resource_id, "", chunk.observations)
            await engine._mark(
                target,
                markers.buffering_end_marker(
                    cycle_id=cycle_id, operation="observation", record_id=stored.id, thread_id=thread.id,
                    started_at=started_at, completed_at=engine.clock.now(), tokens_buffered=message_tokens,
                    buffered_tokens=sum(c.observation_tokens for c in stored.buffered_chunks),
                    observations=chunk.observations or None,
                ),
            )
            engine._emit("buffer-end", thread.id, cycle_id=cycle_id, tokens=message_tokens, output_tokens=output_tokens)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a buffer failure never reaches the actor; messages stay pending
            logger.warning("obsmem: buffered observation of thread %s failed: %s", thread.id, exc)
            engine._emit("buffer-failed", thread.id, cycle_id=cycle_id, error=str(exc))
            await engine._mark(
                target,
                markers.buffering_failed_marker(
                    cycle_id=cycle_id, operation="observation", record_id="", thread_id=thread.id,
                    started_at=started_at, failed_at=engine.clock.now(), tokens_attempted=message_tokens,
                    error=f"{type(exc).__name__}: {exc}",
                ),
            )
        finally:
            await self._stop_heartbeat(beat)
            await engine.store.release_lease(key, self.owner)

    def _buffer_request(
        self, thread: Thread, record: ObservationRecord, messages: list[Message], now: datetime
    ) -> ObservationRequest:
        engine = self.engine
        chunks = [c.observations for c in record.buffered_chunks if c.thread_id == thread.id and c.observations]
        previous = engine.observer_view(record.active_observations)
        chunks = [engine.observer_view(c) for c in chunks]
        if chunks:
            previous = "\n\n".join([previous, _BUFFERED_SEPARATOR, *chunks]).strip()
        budget = engine.config.observation.previous_observer_tokens
        truncated = truncate_previous_observations(
            previous, None if budget is False else int(budget), engine.counter.count_text
        )
        state = record.threads.get(thread.id, ThreadState())
        return ObservationRequest(
            messages=messages,
            previous_observations=truncated.text,
            previous_truncated=truncated.truncated,
            thread_title=thread.title or state.thread_title,
            extracted=dict(state.extracted),
            extractors=engine.extractors,
            continuation_hints=False,
            want_title=False,
            timezone=engine.timezone,
            now=now,
            instruction=engine.config.observation.instruction,
        )

    async def _append_chunk(self, thread: Thread, chunk: BufferedChunk) -> ObservationRecord | None:
        """Append ``chunk`` to the stored head if it continues the coverage exactly."""
        engine = self.engine
        for _ in range(6):
            record = await engine.store.get_head(engine.lineage(thread))
            if record is None:
                return None
            covered = covered_until(record, thread.id)
            if covered >= chunk.last_seq:
                return None  # everything it covers was observed or buffered meanwhile
            between: list[Message] = []
            if chunk.first_seq > covered + 1:
                stored = await engine.store.list_messages(thread.id, after_seq=covered, before_seq=chunk.first_seq)
                between = observable_messages(stored)
            if not chunk_fits(record, chunk, between):
                return None
            write = await engine.store.update_record(
                record.model_copy(update={"buffered_chunks": (*record.buffered_chunks, chunk),
                                          "updated_at": engine.clock.now()}),
                expected_version=record.version,
            )
            if write.applied:
                return write.record
            if write.status == "gone":
                return None
        return None

    # -- reflection ---------------------------------------------------------------------------
    async def reflection_step(self, thread: Thread, record: ObservationRecord) -> CycleOutcome | None:
        engine = self.engine
        config = engine.config
        threshold = engine.reflection_threshold()
        if not config.reflection_buffering_enabled or engine.resource_scope:
            # Resource scope reflects per thread section, which a line slice would cut across.
            if record.observation_tokens < threshold:
                return None
            outcome = await engine.maybe_reflect(thread)
            return outcome if outcome.applied or outcome.error is not None else None
        tokens = record.observation_tokens
        if tokens >= threshold:
            if record.buffered_reflection is not None:
                return await self.activate_reflection(thread)
            block_after = config.reflection_block_after
            if block_after is not None and tokens >= block_after:
                outcome = await engine.maybe_reflect(thread)
                return outcome if outcome.applied or outcome.error is not None else None
            await self.maybe_start_reflection(thread, record)
            return None
        start = config.reflection.buffer_start_tokens
        if start is not None and tokens >= start and record.buffered_reflection is None:
            await self.maybe_start_reflection(thread, record)
        return None

    async def activate_reflection(self, thread: Thread) -> CycleOutcome | None:
        engine = self.engine
        for _ in range(3):
            record = await engine.head(thread)
            successor = apply_buffered_reflection(
                record, new_id=f"omr_{uuid.uuid4().hex}", now=engine.clock.now(), count_tokens=engine.counter.count_text
            )
            if successor is None:
                return None
            write = await engine.store.create_generation(record, successor, expected_version=record.version)
            if write.applied and write.record is not None:
                await engine.reindex(
                    thread.resource_id, record.active_observations, write.record.active_observations
                )
                engine._emit("reflection-activated", thread.id, generation=write.record.generation,
                             tokens=record.observation_tokens, output_tokens=write.record.observation_tokens)
                return engine_outcome("reflection", applied=True, record=write.record,
                                      input_tokens=record.observation_tokens,
                                      output_tokens=write.record.observation_tokens)
            if write.status == "gone":
                return None
        return None

    async def maybe_start_reflection(self, thread: Thread, record: ObservationRecord) -> bool:
        engine = self.engine
        lineage = engine.lineage(thread)
        running = self._reflection_tasks.get(lineage)
        if running is not None and not running.done():
            return False
        if record.buffered_reflection is not None or record.reflection_boundary_tokens == record.observation_tokens:
            return False
        if self.handoff is not None:
            await self.handoff(thread, "reflect")
            return False
        write = await engine.store.update_record(
            record.model_copy(update={"reflection_boundary_tokens": record.observation_tokens}),
            expected_version=record.version,
        )
        if not write.applied or write.record is None:
            return False
        task = self.spawn(self._run_reflection(thread, write.record), f"reflect:{lineage}")
        if task is not None:
            self._reflection_tasks[lineage] = task
        return task is not None

    async def _run_reflection(self, thread: Thread, record: ObservationRecord) -> None:
        engine = self.engine
        config = engine.config
        key = f"buffer-reflection:{engine.lineage(thread)}"
        if await engine.store.acquire_lease(key, self.owner, ttl_s=self.lease_ttl_s, now=engine.clock.now()) is None:
            return
        beat = self._start_heartbeat(key)
        try:
            budget = engine.reflection_threshold() * (config.reflection.buffer_activation or 0.5)
            text, line_count = reflection_slice(record.active_observations, record.observation_tokens, budget)
            if not text.strip():
                return
            input_tokens = engine.counter.count_text(text)
            request = ReflectionRequest(
                observations=text,
                target_tokens=max(1, round(0.75 * input_tokens)),
                start_level=engine.reflector_start_level,
                extractors=engine.extractors,
                continuation_hints=False,
                now=engine.clock.now(),
                instruction=config.reflection.instruction,
            )
            result = await engine._timed(engine.reflector.reflect(request), "buffered reflection")
            if not result.observations.strip():
                raise ValueError("the reflector returned empty output")
            buffered = BufferedReflection(
                cycle_id=markers.new_cycle_id("rbuf"), text=result.observations.strip(),
                tokens=engine.counter.count_text(result.observations), input_tokens=input_tokens,
                line_count=line_count, created_at=engine.clock.now(),
            )
            for _ in range(3):
                head = await engine.store.get_head(engine.lineage(thread))
                if head is None or head.id != record.id or head.buffered_reflection is not None:
                    return  # a new generation or another buffer won; this slice no longer applies
                if not head.active_observations.startswith(text):
                    return
                write = await engine.store.update_record(
                    head.model_copy(update={"buffered_reflection": buffered}), expected_version=head.version
                )
                if write.applied:
                    engine._emit("reflection-buffered", thread.id, tokens=input_tokens, output_tokens=buffered.tokens)
                    return
                if write.status == "gone":
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the boundary stays, so the same input is not retried in a loop
            logger.warning("obsmem: buffered reflection of thread %s failed: %s", thread.id, exc)
            engine._emit("reflection-failed", thread.id, error=str(exc))
        finally:
            await self._stop_heartbeat(beat)
            await engine.store.release_lease(key, self.owner)


def engine_outcome(operation: Any, **fields: Any) -> CycleOutcome:
    base = CycleOutcome(operation=operation, applied=False, record=None)
    return dataclasses.replace(base, **fields)
