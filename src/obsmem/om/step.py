"""The synchronous transitions: observe, activate, reflect — each from the stored head to the next.

Each step reads the head, does its model work (if any) as one :class:`~obsmem.om.cycle.Cycle`,
composes the next record from what was read, and commits it with the one loop of
:mod:`obsmem.om.cycle`. When the write is stale the step composes again onto the new head, or
drops its result when another writer already covered the same messages. The background
(buffered) lifecycle in :mod:`obsmem.om.buffering` runs these same steps when it must block.
"""

from __future__ import annotations

import asyncio
import time
import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, tzinfo
from typing import Any, Literal

from obsmem.errors import (
    DegenerateOutputError,
    ObsmemError,
    ObservationError,
    OperationAbortedError,
    ReflectionError,
)
from obsmem.om import markers
from obsmem.om.activation import (
    ActivatedChunks,
    ChunkBounds,
    absorb_covered_chunks,
    activate_chunks,
    chunks_to_take,
    drop_chunks,
    usable_chunks,
)
from obsmem import telemetry
from obsmem.telemetry import log_failure, log_fields
from obsmem.om.cycle import Backoff, Core, Cycle, Fence, Written, describe, traced, without_backoff
from obsmem.om.outcomes import CycleOutcome
from obsmem.om.protocols import (
    AttemptFailed,
    ObservationRequest,
    ObservationResult,
    ReflectionRequest,
    ReflectionResult,
)
from obsmem.om.context import other_conversations_block
from obsmem.om.selection import (
    NOTHING_UNSEEN,
    OTHER_THREAD_SHARE,
    OtherPrefix,
    Unseen,
    choose_other_threads,
    observable_messages,
    observation_batches,
    observer_requests,
    select_observation_prefix,
)
from obsmem.om.text.format import append_with_boundary
from obsmem.om.text.own import OTHER_CONVERSATIONS
from obsmem.om.text.truncation import truncate_previous_observations
from obsmem.storage import leasing
from obsmem.storage.contract import ObservationRecord, ThreadState
from obsmem.tokens import WARM_CHARS, TokenCounter
from obsmem.types import DataPart, Message, Thread

__all__ = [
    "ActivateStep",
    "ActivationTrigger",
    "ObserveStep",
    "OtherThreads",
    "ReflectStep",
    "Trigger",
    "backing_off_outcome",
    "buffer_lease_key",
    "combine_results",
    "observe_in_requests",
    "read_other_threads",
    "recent_lines",
]

logger = logging.getLogger("obsmem")

Trigger = Literal["threshold", "manual", "turn-end"]
ActivationTrigger = Literal["threshold", "ttl", "provider_change"]


# --------------------------------------------------------------------------------------------
# Activation: buffered chunks become active observations (no model call)
# --------------------------------------------------------------------------------------------


class ActivateStep:
    """Buffered chunks become active observations: no model call, one commit."""

    def __init__(self, core: Core) -> None:
        self.core = core

    async def activate(
        self,
        thread: Thread,
        *,
        count: int | None,
        triggered_by: ActivationTrigger = "threshold",
        extra: dict[str, Any] | None = None,
        window: Sequence[Message] | None = None,
        unseen: Unseen = NOTHING_UNSEEN,
        head: ObservationRecord | None = None,
    ) -> CycleOutcome:
        """Activate the first ``count`` stored chunks of a thread (all when None), as far as
        :func:`~obsmem.om.activation.usable_chunks` allows: never past a point that splits a
        call from its result, never over what ``unseen`` keeps raw. Chunks that can never be
        activated (they end between a call and its result) are dropped in the same write.

        ``window`` is the thread's observable messages after the cursor, read with the head
        (read here when not given); ``head``, the record read with it (the first value composed
        onto; read here when not given). Works on the stored head and composes again onto the
        new head when the write is stale, so a chunk appended meanwhile is kept, and the cursor
        only moves forward. The markers go on the covered messages as ``window`` holds them
        (read when it does not hold them all).
        """
        with traced("obsmem.activate", thread, trigger=triggered_by) as span:
            outcome = await self._activate(thread, count, triggered_by, extra, window, unseen, head)
            telemetry.record_outcome(span, outcome)
            return outcome

    async def _activate(
        self,
        thread: Thread,
        count: int | None,
        triggered_by: ActivationTrigger,
        extra: dict[str, Any] | None,
        window: Sequence[Message] | None,
        unseen: Unseen,
        head: ObservationRecord | None = None,
    ) -> CycleOutcome:
        core = self.core
        first = head if window is not None else None
        if window is None:  # read the window only when there is a chunk to judge by it
            first = await core.head(thread)
            if not any(c.thread_id == thread.id for c in first.buffered_chunks):
                return CycleOutcome("activation", False, first, reason="no buffered chunks that may be activated")
            window = await core.unobserved(first, thread.id)
        bounds = ChunkBounds.of(window, unseen)

        async def compose(record: ObservationRecord) -> ActivatedChunks | None:
            usable, broken_from = usable_chunks(record, thread.id, bounds)
            mine = sum(1 for c in record.buffered_chunks if c.thread_id == thread.id)
            if usable == 0 and broken_from == mine:
                return None
            take = usable if count is None else min(usable, max(1, count))
            kept = drop_chunks(record, thread.id, broken_from)
            if broken_from < mine:
                logger.warning(
                    "obsmem: dropping %d buffered chunk(s) of thread %s that no longer end at a valid cut of "
                    "the window (between a tool call and its result, or at a message deleted since); their "
                    "messages stay pending", mine - broken_from, thread.id,
                    extra=log_fields(thread.id, "activation"),
                )
            new = "\n".join(c.observations for c in chunks_to_take(kept, thread.id, take))
            return activate_chunks(
                kept, thread.id, take, now=core.clock.now(), count_tokens=core.counter.count_text,
                older=await revised_active(core, kept, thread, new),
            )

        async def write(record: ObservationRecord, activated: ActivatedChunks) -> Written[ObservationRecord]:
            # The activation markers go with the write (one commit where the store can).
            target, parts = await self._markers(thread, record, activated, triggered_by, extra, window)
            return await core.update_marking(record, activated.record, target, parts)

        done = await core.commit(lambda: core.head(thread), compose, write, first=first)
        if done.status == "declined":
            return CycleOutcome("activation", False, done.current, reason="no buffered chunks that may be activated")
        if done.status == "gone":
            return CycleOutcome("activation", False, None, reason="thread deleted during activation")
        if done.status == "exhausted" or done.current is None or done.proposal is None:
            return CycleOutcome("activation", False, None, reason="store kept changing; activation retried later")
        activated, stored = done.proposal, done.current
        if not activated.chunks:
            return CycleOutcome("activation", False, stored, reason="dropped chunks that split a call from its result")
        core.emit("activation", thread.id, chunks=len(activated.chunks), tokens=activated.message_tokens,
                  triggered_by=triggered_by)
        return CycleOutcome(
            "activation", True, stored, len(activated.message_ids), activated.message_tokens,
            activated.observation_tokens,
        )

    async def _markers(
        self,
        thread: Thread,
        record: ObservationRecord,
        activated: ActivatedChunks,
        triggered_by: ActivationTrigger,
        extra: dict[str, Any] | None,
        window: Sequence[Message],
    ) -> tuple[Message | None, list[DataPart]]:
        """The activation markers of writing ``activated`` over ``record``: one per chunk, under
        the cycle id of the buffer that made it, for the newest covered assistant message
        (``window`` holds the covered messages, else they are read)."""
        core = self.core
        covered = _covered(window, activated.message_ids)
        if covered is None:
            try:
                covered = await core.store.get_messages(list(activated.message_ids))
            except ObsmemError as exc:  # a marker is a record of work, never a reason to lose it
                log_failure(logger, "obsmem: activation markers left out for %s", thread.id, error=exc,
                            thread_id=thread.id, operation="markers")
                return None, []
        now = core.clock.now()
        return markers.marker_target(covered), [
            markers.activation_marker(
                cycle_id=chunk.cycle_id, operation="observation", record_id=record.id,
                thread_id=thread.id, activated_at=now, chunks_activated=1,
                tokens_activated=chunk.message_tokens, observation_tokens=chunk.observation_tokens,
                messages_activated=len(chunk.message_ids), generation=record.generation,
                config=core.marker_config(activated.record), triggered_by=triggered_by, extra=extra,
            )
            for chunk in activated.chunks
        ]


def _covered(window: Sequence[Message], ids: Sequence[str]) -> list[Message] | None:
    """The messages ``ids`` names as ``window`` holds them, in seq order; None unless it holds
    every one (a chunk of messages observed before the window was read)."""
    wanted = set(ids)
    found = [m for m in window if m.id in wanted]
    if len(found) != len(wanted):
        return None
    return sorted(found, key=lambda m: m.seq or 0)


# --------------------------------------------------------------------------------------------
# Observation: unobserved messages become observations
# --------------------------------------------------------------------------------------------


class ObserveStep:
    """Unobserved messages become observations: one observer call per batch, one commit each."""

    def __init__(self, core: Core, activation: ActivateStep) -> None:
        self.core = core
        self.activation = activation

    async def maybe_observe(self, thread: Thread, *, unseen: Unseen = NOTHING_UNSEEN) -> CycleOutcome:
        """Observe when the unobserved tokens reach the threshold (a no-op otherwise)."""
        return await self.observe(thread, force=False, trigger="threshold", unseen=unseen)

    async def observe(
        self, thread: Thread, *, force: bool = False, trigger: Trigger = "manual", unseen: Unseen = NOTHING_UNSEEN,
        window: tuple[ObservationRecord, list[Message]] | None = None,
    ) -> CycleOutcome:
        """Observe synchronously. Buffered chunks are activated first, so the observer only ever
        sees the unbuffered tail and no message is observed twice. A window larger than
        ``observation.max_tokens_per_batch`` is observed in batches, one commit each, and a
        message larger than that in pieces, one observer request each.

        What ``unseen`` names (the input the actor has not been shown yet) stays raw, and the
        prefix never ends between a call and its result (:mod:`obsmem.om.selection`).

        Resource scope: with ``share_threads_in_resource`` the other threads' unobserved messages
        shown in this thread's context (the other-conversations block) count toward its
        threshold, and a threshold observation takes the resource's other due threads along
        (:meth:`observe_others`). A manual (forced) observation observes this thread only.

        ``window``: the head and the thread's unobserved messages as the caller just read them
        (the threshold step's snapshot): used as they are when the head holds no buffered chunk of
        the thread, not read again (a window of thousands of messages pending while the observer
        backs off was read whole twice more a boundary only to find the backoff). What is
        committed is compare-and-set on the head, so a head changed since is still caught.
        """
        core = self.core
        plan = await self._plan(thread, force, unseen, window)
        if isinstance(plan, CycleOutcome):
            return plan
        with traced("obsmem.observe", thread, trigger=trigger, forced=force) as span:
            outcome = await self._leased_run(thread, plan, force, unseen)
            if core.resource_scope and not force and (outcome.applied or plan.cut == 0):
                # Resource scope: the other threads that are due join this cycle (bounded),
                # unless a buffer of the resource runs: it takes them along when it lands
                # (observing them here would overtake it and throw its call away).
                if not await self._buffer_running(thread):
                    record = outcome.record or plan.record
                    others = await self.observe_others(thread, record, plan.others)
                    outcome = _joined(outcome, others)
            telemetry.record_outcome(span, outcome)
            return outcome

    async def _buffer_running(self, thread: Thread) -> bool:
        """Whether a buffer of ``thread``'s lineage holds its lease now, in any process (one
        store call, only with buffering on)."""
        core = self.core
        if not core.config.observation.buffering_enabled:
            return False
        lease = await core.store.get_lease(buffer_lease_key(core.lineage(thread)))
        return lease is not None and not lease.is_expired(core.clock.now())

    async def observe_others(
        self, thread: Thread, record: ObservationRecord, others: OtherThreads | None = None, *, minimum: int | None = None
    ) -> list[CycleOutcome]:
        """Resource scope: observe, in the cycle of ``thread``, the other threads of its resource
        that :func:`~obsmem.om.selection.choose_other_threads` picks: with sharing on, any with
        a safe prefix of at least ``minimum`` tokens (default 1: their messages are in this
        thread's context and count toward its threshold); without, those with at least
        ``OTHER_THREAD_SHARE`` of the threshold unobserved. At most ``MAX_OTHER_THREADS`` threads
        and ``observation.max_tokens_per_batch`` message tokens per cycle. A thread's own buffered
        chunks are activated first (no model call) and only what they leave is observed; a thread
        held by another observer is left out, and nothing is observed while the observer backs off.

        Each thread's messages go to the observer in their own requests (one thread's transcript
        per request, so its lines go into its section) and are committed with that thread's
        cursor by compare-and-set, as its own observation would be. ``others``: the other
        threads' windows already read with ``record`` (read here otherwise: one store call).
        A failure of another thread's observation is reported on its cycle and never raised here.
        """
        core = self.core
        if not core.resource_scope or core.backing_off(record, "observation", thread.id) is not None:
            return []
        if others is None:
            others = await read_other_threads(core, thread, record)
        chosen = self._choose(record, others, minimum)
        if not chosen:
            return []
        outcomes = await asyncio.gather(*(self._observe_other(thread, record, prefix) for prefix in chosen))
        return [o for o in outcomes if o is not None]

    def _choose(self, record: ObservationRecord, others: OtherThreads, minimum: int | None) -> list[OtherPrefix]:
        core = self.core
        windows = {tid: ms for tid, ms in others.windows.items() if ms}
        if not windows:
            return []
        counts = {tid: [core.counter.count_message(m) for m in ms] for tid, ms in windows.items()}
        threshold = core.message_threshold(record)
        if minimum is None:
            minimum = 1 if core.sharing else max(1, round(threshold * OTHER_THREAD_SHARE))
        return choose_other_threads(
            windows, counts, minimum=minimum, max_tokens=core.config.observation.max_tokens_per_batch
        )

    async def _observe_other(
        self, thread: Thread, record: ObservationRecord, prefix: OtherPrefix
    ) -> CycleOutcome | None:
        core = self.core
        other = await core.store.get_thread(prefix.thread_id)
        if other is None or other.resource_id != thread.resource_id:
            return None  # deleted meanwhile (or moved): nothing of it is written
        async with core.leased(_lease_key("observation", core, other)) as held:
            if not held:
                return None
            head = await core.stored_head(other)
            if head is None or head.cursor(other.id) != record.cursor(other.id):
                return None  # observed meanwhile: that work stands
            if not Fence.of(record, core.clock.now()).holds(head):
                return None  # a forget ran while or since the messages were read: they stay pending
            activated: CycleOutcome | None = None
            if any(c.thread_id == other.id for c in head.buffered_chunks):
                # Its own buffers cover the first of these messages: activate them (no model
                # call), then observe only what they left.
                activated = await self.activation.activate(
                    other, count=None, triggered_by="threshold", unseen=Unseen(newest_user=True)
                )
                head = await core.stored_head(other)
                if head is None or any(c.thread_id == other.id for c in head.buffered_chunks):
                    return activated
                cursor = head.cursor(other.id)
                rest = [(m, n) for m, n in zip(prefix.messages, prefix.counts, strict=True) if (m.seq or 0) > cursor]
                if not rest:
                    return activated
                prefix = OtherPrefix(other.id, [m for m, _ in rest], [n for _, n in rest])
            # Its model calls are metered and traced for that thread (the cost ledger).
            with traced("obsmem.observe", other, trigger="other-thread", joined=thread.id) as span:
                try:
                    outcome = await self._observe_batch(
                        other, head, prefix.messages, prefix.counts, prefix.tokens, prefix.tokens
                    )
                except (asyncio.CancelledError, OperationAbortedError):
                    raise
                except ObservationError as exc:  # reported on its own cycle; this thread's turn goes on
                    outcome = CycleOutcome(
                        "observation", False, head, input_tokens=prefix.tokens, error=exc, reason="failed"
                    )
                telemetry.record_outcome(span, outcome)
                return outcome

    async def _leased_run(self, thread: Thread, plan: _Plan, force: bool, unseen: Unseen) -> CycleOutcome:
        core = self.core
        # One process observes a thread at a time: another that finds the same messages due
        # makes no model call and goes on with the stored record (it never waits here, so a
        # turn's bound holds); the next boundary sees what the holder committed. A forced
        # (manual) observation always calls the model, as it ignores a backoff.
        async with core.leased(_lease_key("observation", core, thread)) as held:
            if not held and not force:
                return _held_elsewhere("observation", plan.record)
            head = await core.stored_head(thread)
            if head is None or (head.id, head.version) != (plan.record.id, plan.record.version):
                replanned = await self._plan(thread, force, unseen)  # it changed before we held the lease
                if isinstance(replanned, CycleOutcome):
                    return replanned
                plan = replanned
            return await self._run(thread, plan)

    async def _plan(
        self, thread: Thread, force: bool, unseen: Unseen,
        window: tuple[ObservationRecord, list[Message]] | None = None,
    ) -> _Plan | CycleOutcome:
        """What is due: the head, the window and the prefix to observe (an outcome when nothing is).
        ``window``: see :meth:`observe`."""
        core = self.core
        if window is not None and not any(c.thread_id == thread.id for c in window[0].buffered_chunks):
            first: tuple[ObservationRecord, list[Message]] | CycleOutcome = window
        else:
            first = await self._activate_chunks_first(thread, unseen)
        if isinstance(first, CycleOutcome):
            return first
        record, messages = first
        counts = [core.counter.count_message(m) for m in messages]
        pending = sum(counts)
        threshold = core.message_threshold(record)
        # With sharing on, the other threads' unobserved messages are in this thread's context
        # (the other-conversations block): their tokens count toward its threshold.
        others = await read_other_threads(core, thread, record) if core.sharing and not force else None
        shown = others.block_tokens if others is not None else 0
        if (not messages and not shown) or (not force and pending + shown < threshold):
            return CycleOutcome("observation", False, record, reason="below threshold")
        cuts = unseen.cuts(messages)
        cut = select_observation_prefix(
            messages,
            counts,
            retention_floor=core.config.observation.retention_floor,
            threshold=max(1, threshold - shown),
            force=force,
            cuts=cuts,
        ) if messages else 0
        if cut == 0 and (others is None or not self._choose(record, others, None)):
            return CycleOutcome(
                "observation", False, record,
                reason="no safe prefix (a tool call waits for its result, or the actor has not seen the input yet)",
            )
        if not force:  # a model that keeps failing is left alone until its backoff ends
            backoff = core.backing_off(record, "observation", thread.id)
            if backoff is not None:
                return backing_off_outcome("observation", record, backoff)
        return _Plan(record, messages, counts, pending, cuts, cut, others)

    async def _run(self, thread: Thread, plan: _Plan) -> CycleOutcome:
        """Observe the planned prefix, one batch (one commit) at a time."""
        core = self.core
        record, messages, counts, pending = plan.record, plan.messages, plan.counts, plan.pending
        if plan.cut == 0:  # only other threads are due (resource scope, sharing on)
            return CycleOutcome("observation", False, record, reason="nothing of this thread's own is due")
        batches = observation_batches(plan.cuts, counts, plan.cut, core.config.observation.max_tokens_per_batch)
        outcomes: list[CycleOutcome] = []
        for start, stop in batches:
            batch_tokens = sum(counts[start:stop])
            outcome = await self._observe_batch(
                thread, record, messages[start:stop], counts[start:stop], batch_tokens, pending
            )
            outcomes.append(outcome)
            if not outcome.applied or outcome.record is None:
                break
            record, pending = outcome.record, pending - batch_tokens
        return dataclasses.replace(_combined(outcomes), waited=True)

    async def _activate_chunks_first(
        self, thread: Thread, unseen: Unseen
    ) -> tuple[ObservationRecord, list[Message]] | CycleOutcome:
        """The head and the window once the thread has no buffered chunk left. Re-checked after
        every activation: another engine may append a chunk in between, and observing its
        messages here would observe them twice. A chunk that may not be activated yet (it covers
        input the actor has not seen) leaves nothing to observe either: it comes first."""
        core = self.core
        record = await core.head(thread)
        for _ in range(core.commit_policy.attempts):
            if not any(c.thread_id == thread.id for c in record.buffered_chunks):
                return record, await core.unobserved(record, thread.id)
            before = (record.cursor(thread.id), len(record.buffered_chunks))
            await self.activation.activate(
                thread, count=None, triggered_by="threshold", window=await core.unobserved(record, thread.id),
                unseen=unseen,
            )
            record = await core.head(thread)
            if (record.cursor(thread.id), len(record.buffered_chunks)) == before:
                return CycleOutcome(
                    "observation", False, record, reason="the next buffered chunk covers input the actor has not seen"
                )
        return CycleOutcome("observation", False, record, reason="chunks kept arriving; activation first")

    async def _observe_batch(
        self,
        thread: Thread,
        record: ObservationRecord,
        batch: list[Message],
        counts: list[int],
        batch_tokens: int,
        pending_before: int,
    ) -> CycleOutcome:
        core = self.core
        cycle = core.cycle("observation", thread, record, markers.marker_target(batch))
        async with cycle.closing(batch_tokens):  # however it ends, its start marker is closed
            await cycle.mark(
                markers.observation_start_marker, tokens_to_observe=batch_tokens, config=core.marker_config(record)
            )
            cycle.emit("observation-start", tokens=batch_tokens, messages=len(batch))

            def request(group: list[Message], earlier: ObservationResult | None) -> ObservationRequest:
                return self._request(thread, record, group, cycle.started_at, earlier)

            try:
                result = await observe_in_requests(core, cycle, batch, counts, request)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                return await self._failed(cycle, thread, record, batch_tokens, exc)
            return await self._commit(cycle, thread, record, batch, batch_tokens, pending_before, result)

    def _request(
        self,
        thread: Thread,
        record: ObservationRecord,
        batch: list[Message],
        now: datetime,
        earlier: ObservationResult | None = None,
    ) -> ObservationRequest:
        """The request for ``batch``; ``earlier`` is what the requests before it in the same cycle
        returned (a message observed in pieces), shown as the newest previous observations."""
        core = self.core
        observation = core.config.observation
        state = record.threads.get(thread.id, ThreadState())
        budget = observation.previous_observer_tokens
        shown = core.observer_view(record.active_observations, thread)
        if earlier is not None and earlier.observations.strip():
            shown = f"{shown.rstrip()}\n\n{recent_lines(earlier.observations)}".strip()
        previous = truncate_previous_observations(
            shown, None if budget is False else int(budget), core.counter.count_text,
        )
        return ObservationRequest(
            messages=batch,
            previous_observations=previous.text,
            previous_truncated=previous.truncated,
            current_task=(earlier.current_task if earlier and earlier.current_task else state.current_task),
            suggested_response=(
                earlier.suggested_response if earlier and earlier.suggested_response else state.suggested_response
            ),
            thread_title=thread.title or state.thread_title,
            extracted={**state.extracted, **(earlier.extracted if earlier else {})},
            extractors=core.extractors,
            continuation_hints=observation.continuation_hints,
            want_title=observation.thread_title,
            timezone=core.timezone,
            now=now,
            instruction=observation.instruction,
            thread_id=thread.id,
            resource_id=thread.resource_id,
        )

    async def _commit(
        self,
        cycle: Cycle,
        thread: Thread,
        record: ObservationRecord,
        batch: list[Message],
        batch_tokens: int,
        pending_before: int,
        result: ObservationResult,
    ) -> CycleOutcome:
        """Commit the observation onto the stored head; a buffer that landed inside this batch
        while the model ran is replaced by it, and a writer that observed or buffered these
        messages first wins (its work stands, whatever it did not cover stays pending)."""
        core = self.core
        cursor = record.cursor(thread.id)
        fence = Fence.of(record, core.clock.now())  # the batch was read after its record
        output_tokens = await count_off_loop(core.counter, result.observations)
        end: DataPart | None = None

        async def compose(head: ObservationRecord) -> ObservationRecord | None:
            if not fence.holds(head):  # a forget ran when or since the batch was read: it may hold what went
                return None
            absorbed = absorb_covered_chunks(head, thread.id, through_seq=batch[-1].seq or 0, cursor=cursor)
            if absorbed is None:
                return None
            older = await revised_active(core, absorbed, thread, result.observations)
            absorbed = absorbed.model_copy(update={"active_observations": older})
            composed = self._compose(absorbed, thread, batch, batch_tokens, pending_before, result)
            tokens = await count_off_loop(core.counter, composed.active_observations)
            return composed.model_copy(update={"observation_tokens": tokens})

        async def write(head: ObservationRecord, proposed: ObservationRecord) -> Written[ObservationRecord]:
            # The end marker (it quotes the observations) goes with the record, in one write where
            # the store can: a forget fenced after it finds both, one fenced before finds neither.
            nonlocal end
            end = cycle.part(
                markers.observation_end_marker, record_id=head.id, completed_at=cycle.now(),
                tokens_observed=batch_tokens, observation_tokens=output_tokens,
                observations=result.observations or None, current_task=result.current_task,
                suggested_response=result.suggested_response, extracted_values=result.extracted,
                extraction_failures=result.extraction_failures,
            )  # fmt: skip
            return await core.update_marking(head, proposed, cycle.target, [end])

        done = await core.commit(lambda: core.stored_head(thread), compose, write, first=record)
        if done.status == "declined" and not fence.holds(done.current):
            reason = "a forget changed the stored messages while they were observed; they stay pending"
            await cycle.mark_failed(reason, batch_tokens, record_id=(done.base or record).id)
            return CycleOutcome("observation", False, done.current, reason=reason)
        if done.status == "gone":
            await cycle.mark_failed("the thread was deleted during observation", batch_tokens, record_id=record.id)
            return CycleOutcome("observation", False, None, reason="thread deleted during observation")
        if done.status == "declined":
            # The start marker gets its closing marker, so the log never shows a dangling cycle.
            await cycle.mark_failed(
                "superseded: another writer observed or buffered these messages first", batch_tokens,
                record_id=(done.base or record).id,
            )
            return CycleOutcome("observation", False, done.current, reason="superseded by a concurrent observation")
        if done.status == "exhausted" or done.current is None or done.base is None:
            # Other writers (processes on the same store) won every compare-and-set: nothing
            # failed here, so the turn goes on, whatever the failure policy; the messages stay
            # pending and a later boundary observes them.
            reason = (
                f"not committed: other writers changed the record on all {core.commit_policy.attempts} attempts; "
                "the messages stay pending"
            )
            await cycle.mark_failed(reason, batch_tokens, record_id=(done.current or record).id)
            cycle.emit("observation-failed", error=reason)
            logger.warning("obsmem: observation of thread %s %s", thread.id, reason)
            return CycleOutcome("observation", False, done.current or record, input_tokens=batch_tokens, reason=reason)
        stored, base = done.current, done.base
        if end is not None:
            cycle.noted(end)
        await self._after_observation(thread, result, fence)
        await core.reindex(thread, base.active_observations, stored.active_observations)
        cycle.emit("observation-end", tokens=batch_tokens, output_tokens=output_tokens, messages=len(batch))
        return CycleOutcome("observation", True, stored, len(batch), batch_tokens, output_tokens)

    def _compose(
        self,
        record: ObservationRecord,
        thread: Thread,
        batch: list[Message],
        batch_tokens: int,
        pending_before: int,
        result: ObservationResult,
    ) -> ObservationRecord:
        core = self.core
        last = batch[-1]
        assert last.seq is not None, "stored messages always carry a seq"
        active = append_with_boundary(
            record.active_observations, core.package(thread, batch, result.observations), last.created_at
        )
        state = record.threads.get(thread.id, ThreadState())
        hints_on = core.config.observation.continuation_hints
        title = result.thread_title if core.config.observation.thread_title else None
        new_state = state.model_copy(
            update={
                "cursor": max(state.cursor, last.seq),
                "current_task": (result.current_task or state.current_task) if hints_on else None,
                "suggested_response": result.suggested_response if hints_on else None,
                "thread_title": title or state.thread_title,
                "extracted": {**state.extracted, **result.extracted},
            }
        )
        return record.model_copy(
            update={
                "active_observations": active,
                "observation_tokens": 0,  # counted off the loop by the caller (count_off_loop)
                "total_tokens_observed": record.total_tokens_observed + batch_tokens,
                "pending_message_tokens": max(0, pending_before - batch_tokens),
                "threads": {**record.threads, thread.id: new_state},
                "buffer_boundary_tokens": 0,
                "metadata": without_backoff(record.metadata, "observation"),
                "updated_at": core.clock.now(),
            }
        )

    async def _after_observation(self, thread: Thread, result: ObservationResult, fence: Fence) -> None:
        """Side effects that follow a committed observation: working memory and the title.

        The working memory is written after the record's commit, so an erase that ran in between
        (a delete of the thread or the user, a forget: another process, a replica) found nothing
        of it to scrub, and the write would bring the erased text back. So it is checked after the
        write (the eraser fences or deletes the record before it scrubs): when the record is gone,
        the thread is gone or ``fence`` (taken when the batch was read) no longer holds, the key
        just written goes (working memory is derived; what the erase took must not come back)."""
        core = self.core
        working_memory = result.extracted.get("working-memory")
        if isinstance(working_memory, str) and working_memory.strip():
            key = core.working_memory_key(thread)
            await core.store.set_working_memory(key, working_memory.strip())
            head = await core.stored_head(thread)
            if head is None or not fence.holds(head) or await core.store.get_thread(thread.id) is None:
                await core.store.delete_working_memory(key)
        title = (result.thread_title or "").strip()
        if not (core.config.observation.thread_title and len(title) >= 3):
            return

        async def compose(current: Thread) -> Thread | None:
            if current.title_pinned or current.title == title:
                return None
            return current.model_copy(update={"title": title, "updated_at": core.clock.now()})

        async def write(current: Thread, proposed: Thread) -> Written[Thread]:
            stored = await core.store.update_thread(proposed, expected_version=current.version)
            if stored is not None:
                return Written("applied", stored)
            return Written("stale", await core.store.get_thread(thread.id))  # None: deleted

        await core.commit(lambda: core.store.get_thread(thread.id), compose, write)

    async def _failed(
        self, cycle: Cycle, thread: Thread, record: ObservationRecord, batch_tokens: int, exc: BaseException,
    ) -> CycleOutcome:
        """A failed observation: closing marker, event, and the role's durable backoff; then raise
        or return per the failure policy."""
        core = self.core
        await cycle.mark_failed(describe(exc), batch_tokens, record_id=record.id)
        cycle.emit("observation-failed", error=describe(exc))
        if isinstance(exc, OperationAbortedError):
            raise exc
        await core.back_off(thread, "observation", exc)
        degenerate = isinstance(exc, DegenerateOutputError)
        if core.failure_policy == "throw" and not degenerate:
            if isinstance(exc, ObservationError):
                raise exc
            raise ObservationError(
                f"Observing thread '{thread.id}' failed: {describe(exc)}. The messages stay pending and "
                "will be observed on the next cycle (set failure_policy='warn' to keep the turn going)."
            ) from exc
        if core.failure_policy == "warn" or degenerate:
            log_failure(logger, "obsmem: observation of thread %s failed, messages stay pending", thread.id,
                        error=exc, thread_id=thread.id, operation="observation")
        return CycleOutcome("observation", False, record, input_tokens=batch_tokens, error=exc, reason="failed")


async def observe_in_requests(
    core: Core,
    cycle: Cycle,
    messages: list[Message],
    counts: list[int],
    request: Callable[[list[Message], ObservationResult | None], ObservationRequest],
) -> ObservationResult:
    """Observe ``messages`` in requests of at most ``observation.max_tokens_per_batch`` message
    tokens (a larger message in pieces, :func:`~obsmem.om.selection.observer_requests`), one
    after the other, each shown what the ones before it returned; the results are combined
    into one. ``request`` builds a request for some messages, given the results so far."""
    limit = core.config.observation.max_tokens_per_batch
    if counts and max(counts) > limit:  # cutting a huge message counts its text: off the loop
        groups = await asyncio.to_thread(observer_requests, messages, counts, limit, core.counter)
    else:
        groups = observer_requests(messages, counts, limit, core.counter)
    result: ObservationResult | None = None
    pieces = len(groups) > 1
    for group in groups:
        # Building a request truncates the previous observations to their budget; in pieces (a
        # huge message) each request also shows the cycle's output so far, tens of kilobytes to
        # read and count for every piece: off the loop then.
        built = await asyncio.to_thread(request, group, result) if pieces else request(group, result)
        started, started_real = core.clock.now(), time.monotonic()
        answer = await cycle.run(core.observer.observe(built))
        core.observer_latency.note((core.clock.now() - started).total_seconds())
        core.observer_latency_real.note(time.monotonic() - started_real)
        result = answer if result is None else combine_results(result, answer)
    return result if result is not None else ObservationResult(observations="")


#: How much of a cycle's own earlier output its next request is shown at most (it is truncated to
#: ``previous_observer_tokens`` anyway; the cap keeps a message in hundreds of pieces linear).
RECENT_OUTPUT_CHARS = 32_000


def recent_lines(text: str, max_chars: int = RECENT_OUTPUT_CHARS) -> str:
    """The whole lines at the end of ``text`` that fit in ``max_chars`` (all of it when it fits)."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    start = text.find("\n", len(text) - max_chars)
    return text[start + 1:] if start >= 0 else text[-max_chars:]


async def count_off_loop(counter: TokenCounter, text: str) -> int:
    """Tokens of ``text``; a long one (from ``WARM_CHARS`` characters: the observations of a
    pasted megabyte) is counted in a thread, so the event loop never stalls on it."""
    if len(text) < WARM_CHARS:
        return counter.count_text(text)
    return await asyncio.to_thread(counter.count_text, text)


async def revised_active(core: Core, record: ObservationRecord, thread: Thread, new: str) -> str:
    """The active observations without the lines that ``new`` (the lines about to be appended)
    makes stale, where the observer can tell (``OfflineObserver.revise``: linear, off the loop
    for a large record); as they are otherwise, and in resource scope, whose sections belong to
    other threads. Raw messages are never touched."""
    revise = getattr(core.observer, "revise", None)
    if revise is None or core.resource_scope or not new.strip():
        return record.active_observations
    revised: str = await revise(record.active_observations, new)
    return revised


def combine_results(first: ObservationResult, then: ObservationResult) -> ObservationResult:
    """Two consecutive requests' results as one: the observations in order, the newest hints,
    the first title, extracted values merged (the later wins)."""
    observations = "\n\n".join(t for t in (first.observations.strip(), then.observations.strip()) if t)
    return ObservationResult(
        observations=observations,
        current_task=then.current_task or first.current_task,
        suggested_response=then.suggested_response or first.suggested_response,
        thread_title=first.thread_title or then.thread_title,
        extracted={**first.extracted, **then.extracted},
        extraction_failures={**first.extraction_failures, **then.extraction_failures},
        usage=first.usage + then.usage,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """A due observation: the head it was planned on, its window and the prefix to observe."""

    record: ObservationRecord
    messages: list[Message]
    counts: list[int]
    pending: int
    cuts: Sequence[int]
    cut: int
    others: OtherThreads | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class OtherThreads:
    """Resource scope: the unobserved messages of the resource's other threads (by thread id,
    as of one record), and the tokens of the other-conversations block they make in this
    thread's context (0 unless sharing is on and the context shows the block)."""

    windows: dict[str, list[Message]]
    block_tokens: int = 0
    #: The messages the other-conversations block is rendered from, by thread id in id order
    #: (what ``Memory`` shows with sharing on; read with the same record, so reusable for it).
    shown: tuple[tuple[str, list[Message]], ...] = ()


async def read_other_threads(core: Core, thread: Thread, record: ObservationRecord) -> OtherThreads:
    """The other threads of ``thread``'s resource after their cursors in ``record``: one store
    call, which reads only those messages (never what a thread's cursor has passed, however long
    the resource's history; a thread ``record`` has no cursor for yet is read whole).

    The block's tokens are counted on the block as the context renders it (the same selection
    as ``Memory``'s other-conversations: no system or marker-only message), and only when the
    context shows it (sharing on, and observations to show it with)."""
    by_thread: dict[str, list[Message]] = {}
    cursors = {tid: state.cursor for tid, state in record.threads.items()}
    read = await core.store.list_resource_messages_after(thread.resource_id, cursors, exclude_thread_id=thread.id)
    for message in read:
        tid = message.thread_id
        if tid is None or tid == thread.id or (message.seq or 0) <= cursors.get(tid, 0):
            continue
        if message.role == "system" or message.is_marker_only:
            continue
        by_thread.setdefault(tid, []).append(message)
    ordered = sorted(by_thread.items())
    tokens = 0
    if core.sharing and record.active_observations.strip():
        tokens = other_block_tokens(core, ordered)
    return OtherThreads({tid: observable_messages(ms) for tid, ms in ordered}, tokens, tuple(ordered))


_BLOCK_FRAME = "\n".join([OTHER_CONVERSATIONS, "START_OTHER_CONVERSATIONS_BLOCK", "END_OTHER_CONVERSATIONS_BLOCK"])
#: How many threads' block tokens an engine remembers (by the thread's shown messages).
_BLOCK_MEMO = 512


def other_block_tokens(core: Core, others: Sequence[tuple[str, list[Message]]]) -> int:
    """The tokens of the other-conversations block ``others`` render to (0 when it renders to
    nothing): its frame once, and each thread's part as the block renders it alone, remembered
    by that thread's messages (id, role, text), so a boundary only renders and counts the threads
    that changed since the last one (within a token or two of counting the joined block)."""
    memo = core.other_block_memo
    total = 0
    for thread_id, messages in others:
        key = (thread_id, tuple((m.id, m.role, m.text) for m in messages))
        tokens = memo.get(key)
        if tokens is None:
            alone = other_conversations_block([(thread_id, messages)])
            tokens = max(0, core.counter.count_text(alone) - _frame_tokens(core)) if alone else 0
            memo[key] = tokens
            while len(memo) > _BLOCK_MEMO:
                memo.popitem(last=False)
        else:
            memo.move_to_end(key)
        total += tokens
    return total + _frame_tokens(core) if total else 0


def _frame_tokens(core: Core) -> int:
    key = ("", ())
    tokens = core.other_block_memo.get(key)
    if tokens is None:
        tokens = core.other_block_memo[key] = core.counter.count_text(_BLOCK_FRAME)
    return tokens


def _joined(own: CycleOutcome, others: Sequence[CycleOutcome]) -> CycleOutcome:
    """A thread's observation and the other threads' that joined its cycle, as one outcome."""
    applied = [o for o in others if o.applied]
    if not applied:
        return own
    parts = [own, *applied] if own.applied else applied
    records = [o.record for o in parts if o.record is not None]
    newest = max(records, key=lambda r: (r.generation, r.version)) if records else own.record
    return CycleOutcome(
        "observation", True, newest,
        messages=sum(o.messages for o in parts),
        input_tokens=sum(o.input_tokens for o in parts),
        output_tokens=sum(o.output_tokens for o in parts),
        error=own.error, reason=own.reason if own.applied else "",
        waited=True,
    )


def buffer_lease_key(lineage: str) -> str:
    """The lease an observation buffer of ``lineage`` holds while it runs (one per lineage: in
    resource scope one buffer per resource at a time, which takes the other due threads along)."""
    return leasing.lineage_lease(leasing.BUFFER_OBSERVATION, lineage)


def _lease_key(operation: Literal["observation", "reflection"], core: Core, thread: Thread) -> str:
    """The lease a synchronous step holds while it calls its model: reflection per record
    (lineage), observation per thread (in resource scope a cycle that takes other threads along
    holds each one's lease while it observes it: :meth:`ObserveStep.observe_others`)."""
    lineage = core.lineage(thread)
    if operation == "reflection":
        return leasing.lineage_lease(leasing.SYNC_REFLECTION, lineage)
    if core.resource_scope:
        return leasing.thread_observation_lease(lineage, thread.id)
    return leasing.lineage_lease(leasing.SYNC_OBSERVATION, lineage)


def _held_elsewhere(operation: Literal["observation", "reflection"], record: ObservationRecord) -> CycleOutcome:
    """The outcome of a due step whose lease another holder has (no model call was made)."""
    return CycleOutcome(
        operation, False, record,
        reason=f"another process is running this {operation}; going on with the stored record",
    )


def backing_off_outcome(
    operation: Literal["observation", "reflection"], record: ObservationRecord, backoff: Backoff
) -> CycleOutcome:
    """The outcome of a due call skipped while its model backs off (no model call was made)."""
    return CycleOutcome(
        operation, False, record,
        reason=f"backing off until {backoff.until.isoformat()} after {backoff.failures} failure(s): {backoff.error}",
    )


def _combined(outcomes: Sequence[CycleOutcome]) -> CycleOutcome:
    """One outcome for the batches of one observation: what was committed, and how it ended."""
    last = outcomes[-1]
    applied = [o for o in outcomes if o.applied]
    if len(outcomes) == 1 or not applied:
        return last
    return CycleOutcome(
        "observation",
        True,
        last.record if last.record is not None else applied[-1].record,
        messages=sum(o.messages for o in applied),
        input_tokens=sum(o.input_tokens for o in applied),
        output_tokens=sum(o.output_tokens for o in applied),
        error=None if last.applied else last.error,
        reason="" if last.applied else last.reason,
    )


# --------------------------------------------------------------------------------------------
# Reflection: the observations are condensed into a new generation
# --------------------------------------------------------------------------------------------


class ReflectStep:
    """The observations are condensed into a new generation: one reflector call, one commit."""

    def __init__(self, core: Core) -> None:
        self.core = core

    async def maybe_reflect(self, thread: Thread) -> CycleOutcome:
        """Reflect when the observations reach the threshold (and no backoff or suppression holds).

        One process reflects a record at a time: another that finds it due makes no model call
        and goes on with the stored record (it never waits here, so a turn's bound holds); the
        next boundary sees the generation the holder committed.
        """
        core = self.core
        record = await core.head(thread)
        not_due = self._not_due(thread, record)
        if not_due is not None:
            return not_due
        async with core.leased(_lease_key("reflection", core, thread)) as held:
            if not held:
                return _held_elsewhere("reflection", record)
            record = await core.head(thread)  # another process may have reflected before we held it
            not_due = self._not_due(thread, record)
            if not_due is not None:
                return not_due
            outcome = await self._reflect(
                thread, record, target=core.reflection_threshold(), start_level=core.reflector_start_level,
                guidance=None, trigger="threshold",
            )
        return dataclasses.replace(outcome, waited=True)

    def _not_due(self, thread: Thread, record: ObservationRecord) -> CycleOutcome | None:
        core = self.core
        if record.observation_tokens < core.reflection_threshold():
            return CycleOutcome("reflection", False, record, reason="below threshold")
        if record.reflection_suppressed_at == record.observation_tokens:
            return CycleOutcome("reflection", False, record, reason="suppressed: same input cannot compress better")
        backoff = core.backing_off(record, "reflection", thread.id)
        if backoff is not None:
            return backing_off_outcome("reflection", record, backoff)
        return None

    async def reflect(self, thread: Thread, *, guidance: str | None = None) -> CycleOutcome:
        """Manual reflection: starts at compression level 0 with the reflection threshold as target.
        It always calls the model (as it ignores a backoff); holding the lease meanwhile keeps
        threshold reflections elsewhere from duplicating it."""
        core = self.core
        record = await core.head(thread)
        if not record.active_observations.strip():
            return CycleOutcome("reflection", False, record, reason="nothing to reflect")
        async with core.leased(_lease_key("reflection", core, thread)):
            record = await core.head(thread)
            if not record.active_observations.strip():
                return CycleOutcome("reflection", False, record, reason="nothing to reflect")
            return await self._reflect(
                thread, record, target=core.reflection_threshold(), start_level=0, guidance=guidance,
                trigger="manual",
            )

    async def _reflect(
        self, thread: Thread, record: ObservationRecord, *, target: int, start_level: int, guidance: str | None,
        trigger: str,
    ) -> CycleOutcome:
        with traced(
            "obsmem.reflect", thread, trigger=trigger, generation=record.generation,
            start_level=start_level,
        ) as span:
            outcome = await self._reflect_now(
                thread, record, target=target, start_level=start_level, guidance=guidance
            )
            telemetry.record_outcome(span, outcome)
            return outcome

    async def _reflect_now(
        self, thread: Thread, record: ObservationRecord, *, target: int, start_level: int, guidance: str | None
    ) -> CycleOutcome:
        core = self.core
        anchor, newest = await self._anchor(thread, record)
        cycle = core.cycle("reflection", thread, record, anchor)
        input_tokens = record.observation_tokens
        async with cycle.closing(input_tokens):  # however it ends, its start marker is closed
            await cycle.mark(
                markers.observation_start_marker, tokens_to_observe=input_tokens, config=core.marker_config(record)
            )
            cycle.emit("reflection-start", tokens=input_tokens)
            request = self._request(cycle, thread, record, target, start_level, guidance, core.zone_of(newest))
            try:
                result = await cycle.run(core.reflector.reflect(request))
                if not result.observations.strip():
                    raise ReflectionError("The reflector returned empty output; the observations were kept.")
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                return await self._failed(cycle, thread, record, exc)
            return await self._commit(cycle, thread, record, result, target)

    def _request(
        self, cycle: Cycle, thread: Thread, record: ObservationRecord, target: int, start_level: int,
        guidance: str | None, zone: tzinfo | None = None,
    ) -> ReflectionRequest:
        core = self.core

        async def attempt_failed(info: AttemptFailed) -> None:
            await cycle.mark(
                markers.observation_failed_marker, cycle_id=f"{cycle.id}-l{info.level}", failed_at=cycle.now(),
                tokens_attempted=info.input_tokens, error=info.reason, retrying=True,
            )

        state = record.threads.get(thread.id, ThreadState())
        return ReflectionRequest(
            observations=record.active_observations,
            target_tokens=target,
            start_level=start_level,
            guidance=guidance,
            extracted=dict(state.extracted),
            extractors=core.extractors,
            continuation_hints=core.config.reflection.continuation_hints,
            now=cycle.started_at,
            instruction=core.config.reflection.instruction,
            on_attempt_failed=attempt_failed,
            thread_id=None if core.resource_scope else thread.id,
            resource_id=thread.resource_id,
            timezone=zone,
        )

    async def _commit(
        self, cycle: Cycle, thread: Thread, snapshot: ObservationRecord, result: ReflectionResult, target: int
    ) -> CycleOutcome:
        core = self.core
        input_tokens = snapshot.observation_tokens
        output_tokens = await count_off_loop(core.counter, result.observations)
        fence = Fence.of(snapshot, core.clock.now())

        async def compose(head: ObservationRecord) -> ObservationRecord | None:
            if not fence.holds(head):  # a forget ran when or since the snapshot: its result may hold what went
                return None
            return self._compose(snapshot, head, result, output_tokens, target)

        end: DataPart | None = None

        async def write(head: ObservationRecord, proposed: ObservationRecord) -> Written[ObservationRecord]:
            # The end marker (it quotes the reflection) goes with the new generation, in one write
            # where the store can: a forget fenced after it finds both, one fenced before finds neither.
            nonlocal end
            end = cycle.part(
                markers.observation_end_marker, record_id=head.id, completed_at=cycle.now(),
                tokens_observed=input_tokens, observation_tokens=output_tokens,
                observations=result.observations, suggested_response=result.suggested_response,
            )  # fmt: skip
            return await core.new_generation_marking(head, proposed, cycle.target, [end], fence=fence)

        done = await core.commit(lambda: core.stored_head(thread), compose, write, first=snapshot)
        if done.status == "declined":
            # The start marker gets its closing marker, so the log never shows a dangling cycle.
            await cycle.mark_failed(
                "superseded: another writer made the next generation first; this result no longer applies",
                input_tokens, record_id=(done.current or snapshot).id,
            )
            return CycleOutcome("reflection", False, done.current, reason="superseded by a concurrent reflection")
        if done.status == "gone":
            await cycle.mark_failed("the thread was deleted during reflection", input_tokens)
            return CycleOutcome("reflection", False, None, reason="thread deleted during reflection")
        if done.status == "exhausted" or done.current is None or done.base is None:
            await cycle.mark_failed(
                f"the store kept changing; the reflection was dropped after {core.commit_policy.attempts} attempts",
                input_tokens,
            )
            return CycleOutcome("reflection", False, done.current, reason="store kept changing; reflection dropped")
        stored, base = done.current, done.base
        if end is not None:
            cycle.noted(end)
        await core.reindex(thread, base.active_observations, stored.active_observations)
        cycle.emit("reflection-end", tokens=input_tokens, output_tokens=output_tokens, generation=stored.generation)
        return CycleOutcome("reflection", True, stored, 0, input_tokens, output_tokens)

    def _compose(
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
        core = self.core
        if head.generation != snapshot.generation or not head.active_observations.startswith(
            snapshot.active_observations
        ):
            return None
        remainder = head.active_observations[len(snapshot.active_observations):].strip()
        active = result.observations.strip()
        if remainder:
            active = f"{active}\n\n{remainder}"
        tokens = output_tokens if not remainder else core.counter.count_text(active)
        now = core.clock.now()
        threads = dict(head.threads)
        if result.suggested_response and head.thread_id in threads and core.config.reflection.continuation_hints:
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
                "metadata": without_backoff(head.metadata, "reflection"),
                "created_at": now,
                "updated_at": now,
            }
        )

    async def _failed(
        self, cycle: Cycle, thread: Thread, record: ObservationRecord, exc: BaseException
    ) -> CycleOutcome:
        input_tokens = record.observation_tokens
        await cycle.mark_failed(describe(exc), input_tokens)
        cycle.emit("reflection-failed", error=describe(exc))
        if isinstance(exc, OperationAbortedError):
            raise exc
        await self._suppress(thread, record, input_tokens)
        await self.core.back_off(thread, "reflection", exc)
        log_failure(logger, "obsmem: reflection of thread %s failed, observations kept", thread.id, error=exc,
                    thread_id=thread.id, operation="reflection")
        return CycleOutcome("reflection", False, record, input_tokens=input_tokens, error=exc, reason="failed")

    async def _suppress(self, thread: Thread, record: ObservationRecord, at_tokens: int) -> None:
        """Remember that reflecting this exact input failed, so it is not retried in a loop."""
        core = self.core

        async def compose(current: ObservationRecord) -> ObservationRecord | None:
            if current.observation_tokens != at_tokens:
                return None
            return current.model_copy(update={"reflection_suppressed_at": at_tokens})

        await core.commit(lambda: core.stored_head(thread), compose, core.update, first=record)

    async def _anchor(self, thread: Thread, record: ObservationRecord) -> tuple[Message | None, Message | None]:
        """Reflection markers go on the newest observed assistant message of the thread; the
        newest observed message (any role) gives "now" its zone. One read for both."""
        cursor = record.cursor(thread.id)
        if cursor <= 0:
            return None, None
        recent = await self.core.store.list_messages(thread.id, before_seq=cursor + 1, limit=50, newest_first=True)
        return next((m for m in recent if m.role == "assistant"), None), (recent[0] if recent else None)
