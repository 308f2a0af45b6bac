"""The observation engine: runs observe and reflect against the store, safely.

Every transition follows one shape: read the head record → do the (possibly slow) model work
outside any transaction → compose the next record from what was read → compare-and-set. When
the write comes back stale, the engine re-reads and either recomposes onto the new head (if its
work still applies) or drops its result (if another writer already covered the same messages).
Nothing here holds a lock, so any number of engines, in any number of processes, can share a
store: the storage contract is the only coordination.

The engine receives its store, observer, reflector, counter and clock; it never builds them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo

from obsmem.clock import Clock
from obsmem.config import MemoryConfig
from obsmem.errors import (
    DegenerateOutputError,
    ObservationError,
    ObsmemError,
    OperationAbortedError,
    ReflectionError,
    ThreadNotFoundError,
)
from obsmem.models.retry import FailurePolicy
from obsmem.om import markers
from obsmem.om.activation import activate_chunks
from obsmem.om.buffering import BufferedLifecycle, Handoff, Spawn, StepResult
from obsmem.om.extractors import Extractor
from obsmem.om.text.format import append_with_boundary
from obsmem.om.group_index import GroupIndex
from obsmem.om.text.groups import observation_group, strip_groups, wrap_group
from obsmem.om.outcomes import CycleOutcome, EngineEvent
from obsmem.om.protocols import (
    AttemptFailed,
    ObservationRequest,
    ObservationResult,
    Observer,
    ReflectionRequest,
    ReflectionResult,
    Reflector,
)
from obsmem.om.regroup import GroupedReflector
from obsmem.om.sections import SectionedReflector, remove_thread, wrap_section
from obsmem.om.selection import observable_messages, select_observation_prefix
from obsmem.om.text.truncation import truncate_previous_observations
from obsmem.storage.contract import ObservationRecord, Store, ThreadState, lineage_key
from obsmem.tokens import TokenCounter
from obsmem.types import DataPart, Message, Thread

__all__ = ["CycleOutcome", "Engine", "EngineEvent", "FailurePolicy"]

logger = logging.getLogger("obsmem")

Trigger = Literal["threshold", "manual", "turn-end"]
# A model call's result is worth retrying a commit for: under contention (several processes on
# one thread) each stale write re-reads the head, composes again and, after a short random
# pause, tries again, so writers that collided do not collide again in lockstep.
_MAX_COMMIT_ATTEMPTS = 8
_COMMIT_BACKOFF_S = 0.005


async def _commit_backoff(attempt: int) -> None:
    """Real time on purpose: a virtual clock in tests must not move because writers collided."""
    await asyncio.sleep(random.uniform(0, _COMMIT_BACKOFF_S * 2 ** min(attempt, 6)))


class Engine:
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
        model_timeout_s: float | None = 600.0,
        on_event: Callable[[EngineEvent], None] | None = None,
        working_memory_scope: Literal["thread", "resource"] = "thread",
        spawn: Spawn | None = None,
        group_index: GroupIndex | None = None,
        handoff: Handoff | None = None,
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
        self.failure_policy = failure_policy
        self.model_timeout_s = model_timeout_s
        self.on_event = on_event
        self.working_memory_scope = working_memory_scope
        # The config is immutable, so the zone observations are dated in is resolved once.
        self.timezone: tzinfo | None = ZoneInfo(config.timezone) if config.timezone else None
        # Buffered mode needs somewhere to run background work; without a spawn handle the
        # engine runs synchronously whatever the configuration says.
        self.buffered: BufferedLifecycle | None = None
        if spawn is not None and config.observation.buffering_enabled:
            self.buffered = BufferedLifecycle(self, spawn, handoff)

    async def advance(self, thread: Thread, *, turn_start: bool = False, actor_model: str | None = None) -> StepResult:
        """Everything due at a step boundary: activation, observation, reflection, new buffers.

        Returns the outcomes and the state after them, from which the actor's context is built
        without reading the store again.
        """
        if self.buffered is not None:
            return await self.buffered.step(thread, turn_start=turn_start, actor_model=actor_model)
        outcomes = [await self.maybe_observe(thread)]
        reflected = await self.maybe_reflect(thread)
        if reflected.applied or reflected.error is not None:
            outcomes.append(reflected)
        record = await self.head(thread)
        return StepResult(outcomes, record, await self.unobserved(record, thread.id))

    # -- reading ------------------------------------------------------------------------------
    @property
    def resource_scope(self) -> bool:
        return self.config.scope == "resource"

    def lineage(self, thread: Thread) -> str:
        return lineage_key(self.config.scope, thread.id, thread.resource_id)

    def section(self, thread: Thread, observations: str) -> str:
        """In resource scope every observation lives in its thread's section."""
        return wrap_section(thread.id, observations) if self.resource_scope else observations.strip()

    def package(self, thread: Thread, messages: Sequence[Message], observations: str) -> str:
        """One cycle's observations as stored: a group over ``messages`` (retrieval mode),
        inside the thread's section (resource scope)."""
        if self.retrieval and messages:
            observations = wrap_group(observation_group(thread.id, messages, observations))
        return self.section(thread, observations)

    def observer_view(self, observations: str) -> str:
        """What an observer is shown of earlier observations: the text without group tags."""
        return strip_groups(observations) if self.retrieval else observations

    async def reindex(self, resource_id: str, before: str, after: str) -> None:
        """Retrieval with vectors: make the group index follow a committed change of text."""
        if self.group_index is not None:
            await self.group_index.sync(resource_id, before, after)

    def working_memory_key(self, thread: Thread) -> str:
        if self.working_memory_scope == "resource":
            return f"resource:{thread.resource_id}"
        return f"thread:{thread.id}"

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
        return result.record

    async def unobserved(self, record: ObservationRecord, thread_id: str) -> list[Message]:
        stored = await self.store.list_messages(thread_id, after_seq=record.cursor(thread_id))
        return observable_messages(stored)

    def message_threshold(self, record: ObservationRecord) -> int:
        return self.config.effective_message_threshold(record.observation_tokens)

    def reflection_threshold(self) -> int:
        return self.config.effective_reflection_threshold()

    # -- observation --------------------------------------------------------------------------
    async def maybe_observe(self, thread: Thread) -> CycleOutcome:
        """Observe when the unobserved tokens reach the threshold (a no-op otherwise)."""
        return await self.observe(thread, force=False, trigger="threshold")

    async def observe(self, thread: Thread, *, force: bool = False, trigger: Trigger = "manual") -> CycleOutcome:
        """Observe synchronously. Buffered chunks are activated first, so the observer only ever
        sees the unbuffered tail and no message is observed twice."""
        record = await self.head(thread)
        for _ in range(_MAX_COMMIT_ATTEMPTS * 2):
            # Re-check after every activation: another engine may append a chunk in between,
            # and observing its messages here would observe them twice.
            if not any(c.thread_id == thread.id for c in record.buffered_chunks):
                break
            await self.activate(thread, count=None, triggered_by="threshold")
            record = await self.head(thread)
        else:
            return CycleOutcome("observation", False, record, reason="chunks kept arriving; activation first")
        messages = await self.unobserved(record, thread.id)
        counts = [self.counter.count_message(m) for m in messages]
        pending = sum(counts)
        threshold = self.message_threshold(record)
        if not messages or (not force and pending < threshold):
            return CycleOutcome("observation", False, record, reason="below threshold")
        cut = select_observation_prefix(
            messages,
            counts,
            retention_floor=self.config.observation.retention_floor,
            threshold=threshold,
            force=force,
        )
        if cut == 0:
            return CycleOutcome("observation", False, record, reason="no safe prefix (a tool call is pending)")
        batch = messages[:cut]
        batch_tokens = sum(counts[:cut])
        outcome = await self._observe_batch(thread, record, batch, batch_tokens, pending)
        return dataclasses.replace(outcome, waited=True)

    async def forget_thread(self, thread: Thread) -> None:
        """Resource scope: remove a deleted thread's sections, hints and chunks from the record."""
        if self.group_index is not None:
            try:
                await self.group_index.remove_thread(thread.resource_id, thread.id)
            except ObsmemError as exc:
                logger.warning("obsmem: could not remove the vectors of thread %s: %s", thread.id, exc)
        if not self.resource_scope:
            return
        for _ in range(_MAX_COMMIT_ATTEMPTS * 2):
            record = await self.store.get_head(self.lineage(thread))
            if record is None:
                return
            active = remove_thread(record.active_observations, thread.id)
            threads = dict(record.threads)
            if thread.id in threads:  # the cursor stays (cursors never move back); the rest goes
                threads[thread.id] = ThreadState(cursor=threads[thread.id].cursor)
            updated = record.model_copy(
                update={
                    "active_observations": active,
                    "observation_tokens": self.counter.count_text(active),
                    "threads": threads,
                    "buffered_chunks": tuple(c for c in record.buffered_chunks if c.thread_id != thread.id),
                    "buffered_reflection": None,
                    "updated_at": self.clock.now(),
                }
            )
            write = await self.store.update_record(updated, expected_version=record.version)
            if write.applied or write.status == "gone":
                return

    # -- activation ---------------------------------------------------------------------------
    async def activate(
        self,
        thread: Thread,
        *,
        count: int | None,
        triggered_by: Literal["threshold", "ttl", "provider_change"] = "threshold",
        extra: dict[str, Any] | None = None,
    ) -> CycleOutcome:
        """Activate the first ``count`` stored chunks of a thread (all when None). No model call.

        Works on the stored head and retries from the new head when the write is stale, so a
        chunk appended meanwhile is kept, and the cursor only moves forward.
        """
        for _ in range(_MAX_COMMIT_ATTEMPTS * 2):
            record = await self.head(thread)
            mine = [c for c in record.buffered_chunks if c.thread_id == thread.id]
            if not mine:
                return CycleOutcome("activation", False, record, reason="no buffered chunks")
            take = len(mine) if count is None else max(1, min(count, len(mine)))
            activated = activate_chunks(record, thread.id, take, now=self.clock.now(), count_tokens=self.counter.count_text)
            write = await self.store.update_record(activated.record, expected_version=record.version)
            if write.status == "gone" or write.record is None:
                return CycleOutcome("activation", False, None, reason="thread deleted during activation")
            if not write.applied:
                continue
            stored = write.record
            covered = await self.store.get_messages(list(activated.message_ids))
            now = self.clock.now()
            await self._mark(
                markers.marker_target(covered),
                *(
                    markers.activation_marker(
                        cycle_id=chunk.cycle_id, operation="observation", record_id=stored.id,
                        thread_id=thread.id, activated_at=now, chunks_activated=1,
                        tokens_activated=chunk.message_tokens, observation_tokens=chunk.observation_tokens,
                        messages_activated=len(chunk.message_ids), generation=stored.generation,
                        config=self._marker_config(stored), triggered_by=triggered_by, extra=extra,
                    )
                    for chunk in activated.chunks
                ),
            )
            self._emit("activation", thread.id, chunks=len(activated.chunks), tokens=activated.message_tokens,
                       triggered_by=triggered_by)
            return CycleOutcome(
                "activation", True, stored, len(activated.message_ids), activated.message_tokens,
                activated.observation_tokens,
            )
        return CycleOutcome("activation", False, None, reason="store kept changing; activation retried later")

    async def _observe_batch(
        self,
        thread: Thread,
        record: ObservationRecord,
        batch: list[Message],
        batch_tokens: int,
        pending_before: int,
    ) -> CycleOutcome:
        cycle_id = markers.new_cycle_id("obs")
        started_at = self.clock.now()
        target = markers.marker_target(batch)
        marker_config = self._marker_config(record)
        await self._mark(
            target,
            markers.observation_start_marker(
                cycle_id=cycle_id,
                operation="observation",
                record_id=record.id,
                thread_id=thread.id,
                started_at=started_at,
                tokens_to_observe=batch_tokens,
                config=marker_config,
            ),
        )
        self._emit("observation-start", thread.id, cycle_id=cycle_id, tokens=batch_tokens, messages=len(batch))
        state = record.threads.get(thread.id, ThreadState())
        budget = self.config.observation.previous_observer_tokens
        previous = truncate_previous_observations(
            self.observer_view(record.active_observations), None if budget is False else int(budget),
            self.counter.count_text,
        )
        observation = self.config.observation
        request = ObservationRequest(
            messages=batch,
            previous_observations=previous.text,
            previous_truncated=previous.truncated,
            current_task=state.current_task,
            suggested_response=state.suggested_response,
            thread_title=thread.title or state.thread_title,
            extracted=dict(state.extracted),
            extractors=self.extractors,
            continuation_hints=observation.continuation_hints,
            want_title=observation.thread_title,
            timezone=self.timezone,
            now=started_at,
            instruction=observation.instruction,
        )
        try:
            result = await self._timed(self.observer.observe(request), "observation")
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            return await self._observation_failed(thread, record, target, cycle_id, started_at, batch_tokens, exc)

        output_tokens = self.counter.count_text(result.observations)
        for attempt in range(_MAX_COMMIT_ATTEMPTS):
            composed = self._compose_observation(record, thread, batch, batch_tokens, pending_before, result)
            write = await self.store.update_record(composed, expected_version=record.version)
            if write.applied and write.record is not None:
                await self._after_observation(thread, write.record, result)
                await self.reindex(
                    thread.resource_id, record.active_observations, write.record.active_observations
                )
                await self._mark(
                    target,
                    markers.observation_end_marker(
                        cycle_id=cycle_id,
                        operation="observation",
                        record_id=record.id,
                        thread_id=thread.id,
                        started_at=started_at,
                        completed_at=self.clock.now(),
                        tokens_observed=batch_tokens,
                        observation_tokens=output_tokens,
                        observations=result.observations or None,
                        current_task=result.current_task,
                        suggested_response=result.suggested_response,
                        extracted_values=result.extracted,
                        extraction_failures=result.extraction_failures,
                    ),
                )
                self._emit("observation-end", thread.id, cycle_id=cycle_id, tokens=batch_tokens,
                           output_tokens=output_tokens, messages=len(batch))
                return CycleOutcome("observation", True, write.record, len(batch), batch_tokens, output_tokens)
            if write.status == "gone" or write.record is None:
                return CycleOutcome("observation", False, None, reason="thread deleted during observation")
            current = write.record
            batch_last = batch[-1].seq or 0
            overlapping = [c for c in current.buffered_chunks if c.thread_id == thread.id and c.first_seq <= batch_last]
            if overlapping and all(c.last_seq <= batch_last for c in overlapping):
                # A buffer landed inside this batch while the model ran: this observation covers
                # every message of those chunks, so it replaces them instead of being thrown away.
                current = current.model_copy(
                    update={"buffered_chunks": tuple(c for c in current.buffered_chunks if c not in overlapping)}
                )
                overlapping = []
            if current.cursor(thread.id) != record.cursor(thread.id) or overlapping:
                # Another writer observed or buffered (some of) these messages first; its work
                # stands and whatever it did not cover stays pending for the next cycle. The
                # start marker gets its closing marker, so the log never shows a dangling cycle.
                await self._mark(
                    target,
                    markers.observation_failed_marker(
                        cycle_id=cycle_id, operation="observation", record_id=record.id, thread_id=thread.id,
                        started_at=started_at, failed_at=self.clock.now(), tokens_attempted=batch_tokens,
                        error="superseded: another writer observed or buffered these messages first",
                    ),
                )
                return CycleOutcome("observation", False, current, reason="superseded by a concurrent observation")
            record = current
            logger.debug("observation commit stale (attempt %d); recomposing on the new head", attempt + 1)
            if attempt + 1 < _MAX_COMMIT_ATTEMPTS:  # no pause after the last try: nothing follows it
                await _commit_backoff(attempt)
        error = ObservationError(
            f"Could not commit the observation of thread '{thread.id}' after {_MAX_COMMIT_ATTEMPTS} attempts; "
            "the store kept changing underneath. The messages stay pending."
        )
        return await self._observation_failed(thread, record, target, cycle_id, started_at, batch_tokens, error)

    def _compose_observation(
        self,
        record: ObservationRecord,
        thread: Thread,
        batch: list[Message],
        batch_tokens: int,
        pending_before: int,
        result: ObservationResult,
    ) -> ObservationRecord:
        last = batch[-1]
        assert last.seq is not None, "stored messages always carry a seq"
        active = append_with_boundary(
            record.active_observations, self.package(thread, batch, result.observations), last.created_at
        )
        state = record.threads.get(thread.id, ThreadState())
        hints_on = self.config.observation.continuation_hints
        title = result.thread_title if self.config.observation.thread_title else None
        extracted = {**state.extracted, **result.extracted}
        new_state = state.model_copy(
            update={
                "cursor": max(state.cursor, last.seq),
                "current_task": (result.current_task or state.current_task) if hints_on else None,
                "suggested_response": result.suggested_response if hints_on else None,
                "thread_title": title or state.thread_title,
                "extracted": extracted,
            }
        )
        return record.model_copy(
            update={
                "active_observations": active,
                "observation_tokens": self.counter.count_text(active),
                "total_tokens_observed": record.total_tokens_observed + batch_tokens,
                "pending_message_tokens": max(0, pending_before - batch_tokens),
                "threads": {**record.threads, thread.id: new_state},
                "buffer_boundary_tokens": 0,
                "updated_at": self.clock.now(),
            }
        )

    async def _after_observation(self, thread: Thread, record: ObservationRecord, result: ObservationResult) -> None:
        """Side effects that follow a committed observation: title and working memory."""
        working_memory = result.extracted.get("working-memory")
        if isinstance(working_memory, str) and working_memory.strip():
            await self.store.set_working_memory(self.working_memory_key(thread), working_memory.strip())
        title = (result.thread_title or "").strip()
        if not (self.config.observation.thread_title and len(title) >= 3):
            return
        for _ in range(_MAX_COMMIT_ATTEMPTS):
            current = await self.store.get_thread(thread.id)
            if current is None or current.title_pinned or current.title == title:
                return
            updated = await self.store.update_thread(
                current.model_copy(update={"title": title, "updated_at": self.clock.now()}),
                expected_version=current.version,
            )
            if updated is not None:
                return

    async def _observation_failed(
        self,
        thread: Thread,
        record: ObservationRecord,
        target: Message | None,
        cycle_id: str,
        started_at: datetime,
        batch_tokens: int,
        exc: BaseException,
    ) -> CycleOutcome:
        await self._mark(
            target,
            markers.observation_failed_marker(
                cycle_id=cycle_id,
                operation="observation",
                record_id=record.id,
                thread_id=thread.id,
                started_at=started_at,
                failed_at=self.clock.now(),
                tokens_attempted=batch_tokens,
                error=_describe(exc),
            ),
        )
        self._emit("observation-failed", thread.id, cycle_id=cycle_id, error=_describe(exc))
        if isinstance(exc, OperationAbortedError):
            raise exc
        degenerate = isinstance(exc, DegenerateOutputError)
        if self.failure_policy == "throw" and not degenerate:
            if isinstance(exc, ObservationError):
                raise exc
            raise ObservationError(
                f"Observing thread '{thread.id}' failed: {_describe(exc)}. The messages stay pending and "
                "will be observed on the next cycle (set failure_policy='warn' to keep the turn going)."
            ) from exc
        if self.failure_policy == "warn" or degenerate:
            logger.warning("obsmem: observation of thread %s failed, messages stay pending: %s", thread.id, _describe(exc))
        return CycleOutcome("observation", False, record, input_tokens=batch_tokens, error=exc, reason="failed")

    # -- reflection ---------------------------------------------------------------------------
    async def maybe_reflect(self, thread: Thread) -> CycleOutcome:
        record = await self.head(thread)
        threshold = self.reflection_threshold()
        if record.observation_tokens < threshold:
            return CycleOutcome("reflection", False, record, reason="below threshold")
        if record.reflection_suppressed_at == record.observation_tokens:
            return CycleOutcome("reflection", False, record, reason="suppressed: same input cannot compress better")
        outcome = await self._reflect(
            thread, record, target=threshold, start_level=self.reflector_start_level, guidance=None
        )
        return dataclasses.replace(outcome, waited=True)

    async def reflect(self, thread: Thread, *, guidance: str | None = None) -> CycleOutcome:
        """Manual reflection: starts at compression level 0 with the reflection threshold as target."""
        record = await self.head(thread)
        if not record.active_observations.strip():
            return CycleOutcome("reflection", False, record, reason="nothing to reflect")
        return await self._reflect(thread, record, target=self.reflection_threshold(), start_level=0, guidance=guidance)

    async def _reflect(
        self, thread: Thread, record: ObservationRecord, *, target: int, start_level: int, guidance: str | None
    ) -> CycleOutcome:
        cycle_id = markers.new_cycle_id("refl")
        started_at = self.clock.now()
        anchor = await self._reflection_anchor(thread, record)
        input_tokens = record.observation_tokens
        marker_config = self._marker_config(record)
        await self._mark(
            anchor,
            markers.observation_start_marker(
                cycle_id=cycle_id, operation="reflection", record_id=record.id, thread_id=thread.id,
                started_at=started_at, tokens_to_observe=input_tokens, config=marker_config,
            ),
        )
        self._emit("reflection-start", thread.id, cycle_id=cycle_id, tokens=input_tokens)

        async def attempt_failed(info: AttemptFailed) -> None:
            await self._mark(
                anchor,
                markers.observation_failed_marker(
                    cycle_id=f"{cycle_id}-l{info.level}", operation="reflection", record_id=record.id,
                    thread_id=thread.id, started_at=started_at, failed_at=self.clock.now(),
                    tokens_attempted=info.input_tokens, error=info.reason, retrying=True,
                ),
            )

        state = record.threads.get(thread.id, ThreadState())
        request = ReflectionRequest(
            observations=record.active_observations,
            target_tokens=target,
            start_level=start_level,
            guidance=guidance,
            extracted=dict(state.extracted),
            extractors=self.extractors,
            continuation_hints=self.config.reflection.continuation_hints,
            now=started_at,
            instruction=self.config.reflection.instruction,
            on_attempt_failed=attempt_failed,
        )
        try:
            result = await self._timed(self.reflector.reflect(request), "reflection")
            if not result.observations.strip():
                raise ReflectionError("The reflector returned empty output; the observations were kept.")
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            await self._mark(
                anchor,
                markers.observation_failed_marker(
                    cycle_id=cycle_id, operation="reflection", record_id=record.id, thread_id=thread.id,
                    started_at=started_at, failed_at=self.clock.now(), tokens_attempted=input_tokens,
                    error=_describe(exc),
                ),
            )
            self._emit("reflection-failed", thread.id, cycle_id=cycle_id, error=_describe(exc))
            if isinstance(exc, OperationAbortedError):
                raise
            await self._suppress(record, input_tokens)
            logger.warning("obsmem: reflection of thread %s failed, observations kept: %s", thread.id, _describe(exc))
            return CycleOutcome("reflection", False, record, input_tokens=input_tokens, error=exc, reason="failed")

        output_tokens = self.counter.count_text(result.observations)
        snapshot = record
        for attempt in range(_MAX_COMMIT_ATTEMPTS):
            if attempt:
                await _commit_backoff(attempt)
            successor = self._compose_reflection(snapshot, record, result, output_tokens, target)
            if successor is None:
                return CycleOutcome("reflection", False, record, reason="superseded by a concurrent reflection")
            write = await self.store.create_generation(record, successor, expected_version=record.version)
            if write.applied and write.record is not None:
                await self.reindex(
                    thread.resource_id, record.active_observations, write.record.active_observations
                )
                await self._mark(
                    anchor,
                    markers.observation_end_marker(
                        cycle_id=cycle_id, operation="reflection", record_id=record.id, thread_id=thread.id,
                        started_at=started_at, completed_at=self.clock.now(), tokens_observed=input_tokens,
                        observation_tokens=output_tokens, observations=result.observations,
                        suggested_response=result.suggested_response,
                    ),
                )
                self._emit("reflection-end", thread.id, cycle_id=cycle_id, tokens=input_tokens,
                           output_tokens=output_tokens, generation=write.record.generation)
                return CycleOutcome("reflection", True, write.record, 0, input_tokens, output_tokens)
            if write.status == "gone" or write.record is None:
                return CycleOutcome("reflection", False, None, reason="thread deleted during reflection")
            record = write.record
        return CycleOutcome("reflection", False, record, reason="store kept changing; reflection dropped")

    def _compose_reflection(
        self,
        snapshot: ObservationRecord,
        head: ObservationRecord,
        result: ReflectionResult,
        output_tokens: int,
        threshold: int,
    ) -> ObservationRecord | None:
        """The successor generation, built from the *stored* head.

        Observations appended to the head after the reflected snapshot are kept after the
        reflection; if the head no longer extends the snapshot (another reflection won), the
        result no longer applies and None is returned.
        """
        if head.generation != snapshot.generation or not head.active_observations.startswith(
            snapshot.active_observations
        ):
            return None
        remainder = head.active_observations[len(snapshot.active_observations):].strip()
        active = result.observations.strip()
        if remainder:
            active = f"{active}\n\n{remainder}"
        tokens = output_tokens if not remainder else self.counter.count_text(active)
        now = self.clock.now()
        threads = dict(head.threads)
        if result.suggested_response and head.thread_id in threads and self.config.reflection.continuation_hints:
            tid = head.thread_id
            threads[tid] = threads[tid].model_copy(update={"suggested_response": result.suggested_response})
        return head.model_copy(
            update={
                "id": f"omr_{uuid.uuid4().hex}",
                "generation": head.generation + 1,
                "origin": "reflection",
                "version": 1,
                "superseded_by": None,
                "active_observations": active,
                "observation_tokens": tokens,
                "threads": threads,
                "buffered_reflection": None,
                "reflection_suppressed_at": tokens if tokens >= threshold else None,
                "created_at": now,
                "updated_at": now,
            }
        )

    async def _suppress(self, record: ObservationRecord, at_tokens: int) -> None:
        """Remember that reflecting this exact input failed, so it is not retried in a loop."""
        current: ObservationRecord | None = record
        for _ in range(_MAX_COMMIT_ATTEMPTS):
            if current is None or current.observation_tokens != at_tokens:
                return
            write = await self.store.update_record(
                current.model_copy(update={"reflection_suppressed_at": at_tokens}), expected_version=current.version
            )
            if write.applied or write.status == "gone":
                return
            current = write.record

    async def _reflection_anchor(self, thread: Thread, record: ObservationRecord) -> Message | None:
        """Reflection markers go on the newest observed assistant message of the thread."""
        cursor = record.cursor(thread.id)
        if cursor <= 0:
            return None
        recent = await self.store.list_messages(thread.id, before_seq=cursor + 1, limit=50, newest_first=True)
        return next((m for m in recent if m.role == "assistant"), None)

    # -- helpers ------------------------------------------------------------------------------
    async def _timed(self, work: Awaitable[Any], what: str) -> Any:
        if self.model_timeout_s is None:
            return await work
        try:
            async with asyncio.timeout(self.model_timeout_s):
                return await work
        except TimeoutError as exc:
            error = ReflectionError if "reflection" in what else ObservationError
            raise error(f"The {what} model call did not finish within {self.model_timeout_s:g} s.") from exc

    async def _mark(self, target: Message | None, *parts: DataPart) -> None:
        """Persist markers on ``target`` in one write; None (no assistant message) skips them."""
        if target is None or not parts:
            return
        try:
            await self.store.add_message_parts(target.id, list(parts))
        except ObsmemError as exc:  # a marker is a record of work, never a reason to lose it
            logger.warning("obsmem: could not persist markers %s: %s", [p.name for p in parts], exc)

    def _marker_config(self, record: ObservationRecord) -> markers.MarkerConfig:
        return markers.MarkerConfig(
            message_tokens=self.message_threshold(record),
            observation_tokens=self.reflection_threshold(),
            scope=self.config.scope,
        )


    def _emit(self, kind: Any, thread_id: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(EngineEvent(kind=kind, thread_id=thread_id, data=data))


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:2000]
