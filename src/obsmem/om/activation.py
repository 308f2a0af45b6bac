"""The activation rule: when buffered work becomes active, how much of it, and what that writes.

A chunk is an observation made early over an exact run of messages; *activation* moves a prefix
of the stored chunks into the active observations and advances the cursor past the messages
they cover. A buffered reflection condenses the leading lines of the observations; activating
it makes a new generation. This module holds all of it, as pure functions:

- *when*: :func:`threshold_action` (at the threshold: activate, wait for a running buffer, or
  observe), :func:`model_changed` and :func:`idle_expired` (early activation at a turn's
  start), :func:`early_reflection_allowed` (the guards on activating a reflection early);
- *how much*: :func:`select_activation_prefix` (the retention floor and the prefix choice) and
  :func:`chunks_to_activate`; *how far*: :class:`ChunkBounds` and :func:`usable_chunks` (a chunk
  is activated only where its end splits no call from its result and leaves what the actor has
  not seen yet raw; a chunk that ends between a call and its result is never usable);
- *what it writes*: :func:`activate_chunks`, :func:`apply_buffered_reflection`,
  :func:`absorb_covered_chunks`;
- *whether buffering pays* (adaptive buffering): :class:`WindowGrowth` and
  :class:`LatencyEstimate` (what an engine observed), :func:`buffer_overtaken` (a buffer that a
  synchronous observation would overtake is not started) and :func:`reuse_in_flight` (at
  ``block_after``, wait for the buffer in flight when it lands sooner than a new call would).

The transitions take the record as stored and return the next one, so the engine can
compare-and-set the result and, when the write is stale, recompute from the new head:
activation never works from a stale copy, never moves a cursor backward, and never drops a
chunk that was appended concurrently (it only ever removes the prefix it activated).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from obsmem.errors import InvalidInputError
from obsmem.om.sections import section_safe_line_count
from obsmem.om.selection import Unseen, safe_cursor_seqs, valid_cuts
from obsmem.om.text.format import append_with_boundary
from obsmem.om.text.groups import group_safe_line_count
from obsmem.storage.contract import BufferedChunk, ObservationRecord, ThreadState
from obsmem.thresholds import Threshold, max_threshold, resolve_retention_floor
from obsmem.types import Message

__all__ = [
    "OVERTAKE_MARGIN",
    "ActivatedChunks",
    "LatencyEstimate",
    "WindowGrowth",
    "buffer_due",
    "buffer_overtaken",
    "reuse_in_flight",
    "ChunkBounds",
    "ThresholdAction",
    "absorb_covered_chunks",
    "activate_chunks",
    "buffered_hints",
    "chunks_to_take",
    "activation_floor",
    "apply_buffered_reflection",
    "chunk_fits",
    "chunks_to_activate",
    "covered_until",
    "drop_chunks",
    "early_reflection_allowed",
    "idle_expired",
    "model_changed",
    "projected_message_removal",
    "reflection_slice",
    "select_activation_prefix",
    "threshold_action",
    "usable_chunks",
]


# --------------------------------------------------------------------------------------------
# When: at the threshold, and early at a turn's start
# --------------------------------------------------------------------------------------------

ThresholdAction = Literal["none", "activate", "wait", "observe"]


def threshold_action(
    pending: int, threshold: int, *, has_chunks: bool, buffer_in_flight: bool, block_after: int | None
) -> ThresholdAction:
    """What a step does about ``pending`` unobserved tokens.

    Under the threshold: nothing. At or over it: activate stored chunks while there are any.
    With none left but a buffer in flight, the turn does not block while the window is under
    ``block_after`` (the buffer lands and activates on a later step); at or above it, or with
    nothing in flight, the unbuffered tail is observed synchronously. Waiting for the running
    buffer instead would gain only the one chunk it covers and block again a few turns later.
    """
    if pending < threshold:
        return "none"
    if has_chunks:
        return "activate"
    if buffer_in_flight and block_after is not None and pending < block_after:
        return "wait"
    return "observe"


# --------------------------------------------------------------------------------------------
# Whether a buffer pays for itself (adaptive buffering)
# --------------------------------------------------------------------------------------------

OVERTAKE_MARGIN = 1.25
"""Safety factor on the projected growth of the window while a buffer's model call runs."""


@dataclass
class WindowGrowth:
    """How fast one lineage's window grows, from ``(time, pending tokens)`` samples at its steps.

    Each step after the first adds ``(seconds since the previous step, tokens added)``; a step
    whose window shrank (an observation or activation ran in between) only moves the baseline,
    so neither the time that work took nor the tokens it removed count. The rate is the tokens
    added over the time of the last ``size`` intervals: a burst of instant turns reads as fast,
    an actor that thinks for seconds between turns as slow.
    """

    size: int = 16
    samples: deque[tuple[float, int]] = field(default_factory=deque)
    last: tuple[float, int] | None = None

    def note(self, at_s: float, pending: int) -> None:
        if self.last is not None and pending >= self.last[1]:
            self.samples.append((max(0.0, at_s - self.last[0]), pending - self.last[1]))
            while len(self.samples) > self.size:
                self.samples.popleft()
        self.last = (at_s, pending)

    def largest_step(self) -> int:
        """The most tokens one kept interval added (0 before any)."""
        return max((tokens for _, tokens in self.samples), default=0)

    def rate(self) -> float | None:
        """Tokens per second, or None before any interval. No time passed but tokens added: inf."""
        if not self.samples:
            return None
        added = sum(tokens for _, tokens in self.samples)
        span = sum(seconds for seconds, _ in self.samples)
        if added == 0:
            return 0.0
        return math.inf if span <= 0 else added / span


@dataclass
class LatencyEstimate:
    """The observer's observed latency in seconds: an exponential moving average (``weight`` on
    the newest call), None until a call finished."""

    weight: float = 0.3
    value: float | None = None

    def note(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.value = seconds if self.value is None else (1 - self.weight) * self.value + self.weight * seconds


def buffer_overtaken(
    pending: int, rate: float | None, latency_s: float | None, block_at: int, margin: float = OVERTAKE_MARGIN
) -> bool:
    """Whether a buffer started now, at ``pending`` tokens, would be overtaken: the window is
    projected to reach ``block_at`` (where a synchronous observation runs) before the buffer's
    model call returns. Without a measured rate or latency nothing is projected (False)."""
    if rate is None or latency_s is None or latency_s <= 0 or rate <= 0:
        return False
    return pending + rate * latency_s * margin >= block_at


def buffer_due(
    pending: int,
    threshold: int,
    rate: float | None,
    latency_s: float | None,
    step_tokens: int,
    margin: float = OVERTAKE_MARGIN,
) -> bool | None:
    """The adaptive interval: whether this is the last step at which a buffer started can land
    before the window reaches ``threshold`` (the next step may add ``step_tokens``, and the window
    grows by ``rate × latency_s × margin`` while the call runs). Starting later risks a wait;
    starting earlier spends calls that each re-send the prompt for a sliver of history.

    None without a measured rate and latency (the caller keeps the fixed ``buffer_tokens`` interval).
    """
    if rate is None or latency_s is None or latency_s <= 0:
        return None
    return pending + step_tokens + rate * latency_s * margin >= threshold


def reuse_in_flight(
    pending: int, threshold: int, in_flight_tokens: int, remaining_s: float, latency_s: float | None
) -> bool:
    """At ``block_after`` with a buffer in flight: wait for it (and activate its chunk) rather than
    observe synchronously, when it lands sooner than a new call (``remaining_s`` against the
    observed ``latency_s``) and its chunk alone brings the window under ``threshold`` (so no
    synchronous call follows the wait). Without a measured latency: no (observe, as before)."""
    if latency_s is None:
        return False
    return remaining_s < latency_s and pending - in_flight_tokens < threshold


def model_changed(previous: tuple[str, str], current: tuple[str, str]) -> bool:
    """Whether the actor's ``(provider, model)`` differs from the one of the previous turn.

    A different model is a change; the same model is a change only when both providers are
    known and differ (``openai.responses`` and ``openai`` are one provider once normalised).
    """
    old_provider, old_model = previous
    provider, model = current
    return old_model != model or bool(old_provider and provider and old_provider != provider)


def idle_expired(idle_s: float, ttl_s: float | None) -> bool:
    """Whether ``idle_s`` seconds without activity reach the idle TTL (None: never)."""
    return ttl_s is not None and idle_s >= ttl_s


#: Activating a reflection early (idle or provider change) needs a result worth the rewrite:
#: the combined observations at least this share of the buffer's trigger window.
_EARLY_REFLECTION_SIZE_SHARE = 0.75


def early_reflection_allowed(
    record: ObservationRecord, threshold: int, buffer_activation: float, count_tokens: Callable[[str], int]
) -> bool:
    """The guards on activating a buffered reflection before the threshold.

    Composition: the lines the reflection did not cover must hold at least as many tokens as
    the reflection itself. Size: reflection and those lines together must reach
    ``0.75 × threshold × (1 − buffer_activation)``. Below the threshold nothing is urgent, so
    an activation that would leave a reflection-dominated or tiny log waits for the threshold.
    """
    buffered = record.buffered_reflection
    if buffered is None or not buffered.text.strip():
        return False
    tail = "\n".join(record.active_observations.split("\n")[buffered.line_count:]).strip()
    tail_tokens = count_tokens(tail) if tail else 0
    if tail_tokens < buffered.tokens:
        return False
    return tail_tokens + buffered.tokens >= _EARLY_REFLECTION_SIZE_SHARE * threshold * (1 - buffer_activation)


# --------------------------------------------------------------------------------------------
# How much: which prefix of buffered chunks becomes active
# --------------------------------------------------------------------------------------------

#: An over-boundary may overshoot the target by at most this share of the retention floor.
_MAX_OVERSHOOT_SHARE = 0.95
#: After activation at least min(this, floor) tokens of raw messages should remain.
_MIN_REMAINING_TOKENS = 1000


def activation_floor(activation: float, threshold: Threshold) -> int:
    """The retention floor an activation works with: never more than the threshold itself.

    The reference's swap computes ``threshold × (1 − ratio)``, which caps an absolute target at
    the threshold; ``resolve_retention_floor`` alone would not.
    """
    return min(resolve_retention_floor(activation, threshold), max(0, max_threshold(threshold)))


def select_activation_prefix(
    chunk_message_tokens: Sequence[int],
    activation_ratio_or_absolute: float,
    threshold: Threshold,
    pending_tokens: int,
    *,
    force_max: bool = False,
) -> int:
    """How many leading buffered chunks to activate (0 only when there are none).

    Activation aims to leave about the retention floor of raw messages: the *target* is
    ``pending − floor`` message tokens to remove. Chunks can only be activated as a prefix, so
    the choice is between the smallest prefix covering at least the target ("over") and the
    largest one below it ("under"):

    (a) ``force_max`` (pending is past ``block_after``): over, if it still leaves
        ``min(1000, floor)`` tokens;
    (b) over, if it overshoots the target by at most 95 % of the floor and leaves that minimum;
    (c) under, if it leaves that minimum;
    (d) over, whatever it leaves;
    (e) otherwise the first chunk alone.

    Preferring "over" keeps the window at or below the floor; the 95 % guard stops one huge
    chunk from wiping out almost everything the floor was meant to keep. At least one chunk is
    always activated, because the caller activates only when it has decided to.
    """
    if not chunk_message_tokens:
        return 0
    if any(tokens < 0 for tokens in chunk_message_tokens):
        raise InvalidInputError("Buffered chunk message token counts must be >= 0.")
    floor = activation_floor(activation_ratio_or_absolute, threshold)
    target = max(0, pending_tokens - floor)

    over: tuple[int, int] | None = None  # (chunk count, cumulative message tokens)
    under: tuple[int, int] | None = None
    cumulative = 0
    for count, tokens in enumerate(chunk_message_tokens, start=1):
        cumulative += tokens
        if cumulative >= target:
            if over is None or cumulative < over[1]:
                over = (count, cumulative)
        elif under is None or cumulative > under[1]:
            under = (count, cumulative)

    min_remaining = min(_MIN_REMAINING_TOKENS, floor)
    if over is not None:
        leaves_enough = pending_tokens - over[1] >= min_remaining
        if force_max and leaves_enough:
            return over[0]
        if over[1] - target <= _MAX_OVERSHOOT_SHARE * floor and leaves_enough:
            return over[0]
    if under is not None and pending_tokens - under[1] >= min_remaining:
        return under[0]
    if over is not None:
        return over[0]
    # (e) The reference's last resort. With a non-empty list every prefix is "over" or "under",
    # and an "under" prefix always leaves at least the floor, so this is not reached.
    return 1


def chunks_to_activate(
    chunk_message_tokens: Sequence[int],
    buffer_activation: float,
    threshold: Threshold,
    pending_tokens: int,
    block_after: int | None,
) -> int:
    """How many of a thread's stored chunks a threshold activation takes: the prefix rule,
    forced to the larger prefix once the window reaches ``block_after``."""
    force = block_after is not None and pending_tokens >= block_after
    return select_activation_prefix(
        chunk_message_tokens, buffer_activation, threshold, pending_tokens, force_max=force
    )


def projected_message_removal(
    chunk_message_tokens: Sequence[int],
    activation_ratio_or_absolute: float,
    threshold: Threshold,
    pending_tokens: int,
) -> int:
    """Message tokens an activation would remove right now (without ``force_max``).

    Used for status reports and to decide whether waiting for activation is worthwhile. When
    the window is already within the retention floor nothing needs removing, so this is 0
    even though a forced activation would still take one chunk.
    """
    if not chunk_message_tokens:
        return 0
    floor = activation_floor(activation_ratio_or_absolute, threshold)
    if pending_tokens - floor <= 0:
        return 0
    count = select_activation_prefix(
        chunk_message_tokens, activation_ratio_or_absolute, threshold, pending_tokens
    )
    return sum(chunk_message_tokens[:count])


# --------------------------------------------------------------------------------------------
# What it writes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChunkBounds:
    """Where activation may move a thread's cursor, from the window read with the head.

    ``valid``: the seqs of the messages after which the window may be cut without splitting a
    call from its result or taking a call that waits for its result. ``allowed``: those that
    also leave what the actor has not seen yet raw (:class:`~obsmem.om.selection.Unseen`).
    ``known_until``: the newest seq of that window; a chunk reaching past it was appended after
    the read, and is judged on a later step.
    """

    valid: frozenset[int]
    allowed: frozenset[int]
    known_until: int

    @staticmethod
    def of(window: Sequence[Message], unseen: Unseen) -> ChunkBounds:
        """The bounds of ``window`` (a thread's observable messages after its cursor, in order)."""
        cuts = valid_cuts(window)
        limit = unseen.start(window)
        return ChunkBounds(
            valid=safe_cursor_seqs(window, cuts),
            allowed=safe_cursor_seqs(window, [c for c in cuts if c <= limit]),
            known_until=max((m.seq or 0 for m in window), default=0),
        )


def usable_chunks(record: ObservationRecord, thread_id: str, bounds: ChunkBounds) -> tuple[int, int]:
    """``(usable, broken_from)`` for the thread's stored chunks, in order.

    The first ``usable`` chunks may be activated now, as a prefix (the last one taken must end
    where ``bounds`` allow; a chunk wholly at or before the cursor is stale and may always go).
    From ``broken_from`` on (``len(chunks)`` when none) the chunks cannot ever be activated: one
    ends between a call and its result, so its whole suffix is dropped and those messages are
    observed again — which costs a model call but never shows a result without its call.
    """
    mine = [c for c in record.buffered_chunks if c.thread_id == thread_id]
    cursor = record.cursor(thread_id)
    broken_from = len(mine)
    for index, chunk in enumerate(mine):
        if cursor < chunk.last_seq <= bounds.known_until and chunk.last_seq not in bounds.valid:
            broken_from = index
            break
    usable = broken_from
    while usable and not (mine[usable - 1].last_seq <= cursor or mine[usable - 1].last_seq in bounds.allowed):
        usable -= 1
    return usable, broken_from


def drop_chunks(record: ObservationRecord, thread_id: str, start: int) -> ObservationRecord:
    """``record`` without the thread's chunks from index ``start`` on (others' stay)."""
    mine = [c for c in record.buffered_chunks if c.thread_id == thread_id]
    dropped = {c.id for c in mine[start:]}
    if not dropped:
        return record
    return record.model_copy(
        update={"buffered_chunks": tuple(c for c in record.buffered_chunks if c.id not in dropped)}
    )


def covered_until(record: ObservationRecord, thread_id: str) -> int:
    """The seq up to which a thread's messages are observed or buffered."""
    last = [c.last_seq for c in record.buffered_chunks if c.thread_id == thread_id]
    return max([record.cursor(thread_id), *last])


def chunk_fits(record: ObservationRecord, chunk: BufferedChunk, between: Sequence[Message]) -> bool:
    """Whether ``chunk`` continues the record's coverage with no gap and no overlap.

    ``between`` are the thread's stored observable messages with seq in
    ``(covered_until(record), chunk.first_seq)``; a chunk only fits when there are none.
    A chunk that starts at or before the covered point overlaps work already done.
    """
    return chunk.first_seq > covered_until(record, chunk.thread_id) and not between


@dataclass(frozen=True, slots=True)
class ActivatedChunks:
    record: ObservationRecord
    chunks: tuple[BufferedChunk, ...]
    message_tokens: int
    observation_tokens: int
    message_ids: tuple[str, ...]


def activate_chunks(
    record: ObservationRecord,
    thread_id: str,
    count: int,
    *,
    now: datetime,
    count_tokens: Callable[[str], int],
    older: str | None = None,
) -> ActivatedChunks:
    """Move the first ``count`` chunks of this thread into the active observations.

    ``older`` replaces the record's active observations the chunks are appended to: the caller
    may pass them revised (the lines the chunks make stale gone, see
    :func:`chunks_to_take` and ``OfflineObserver.revise``); None appends to them as they are.

    The thread's hints (current task, suggested response) become the newest activated chunk's
    that has any: its observer wrote them for the moment of its last message, told the hints as
    they stood at its first (:func:`buffered_hints`). The thread's own hints were written for
    an older window, so a chunk without any (one stored by an older version, or hints off)
    clears them; the next synchronous cycle sets fresh ones.
    """
    taken = chunks_to_take(record, thread_id, count)
    if not taken:
        return ActivatedChunks(record, (), 0, 0, ())
    taken_ids = {c.id for c in taken}
    active = record.active_observations if older is None else older
    for chunk in taken:
        active = append_with_boundary(active, chunk.observations, chunk.created_at)
    state = record.threads.get(thread_id, ThreadState())
    extracted = dict(state.extracted)
    for chunk in taken:
        extracted.update(chunk.extracted)
    hinted = next((c for c in reversed(taken) if c.current_task), None)
    new_state = state.model_copy(
        update={
            "cursor": max(state.cursor, taken[-1].last_seq),
            "current_task": hinted.current_task if hinted else None,
            "suggested_response": hinted.suggested_response if hinted else None,
            "extracted": extracted,
        }
    )
    message_tokens = sum(c.message_tokens for c in taken)
    next_record = record.model_copy(
        update={
            "active_observations": active,
            "observation_tokens": count_tokens(active),
            "total_tokens_observed": record.total_tokens_observed + message_tokens,
            "pending_message_tokens": max(0, record.pending_message_tokens - message_tokens),
            "buffered_chunks": tuple(c for c in record.buffered_chunks if c.id not in taken_ids),
            "threads": {**record.threads, thread_id: new_state},
            "buffer_boundary_tokens": 0,
            "updated_at": now,
        }
    )
    return ActivatedChunks(
        record=next_record,
        chunks=taken,
        message_tokens=message_tokens,
        observation_tokens=sum(c.observation_tokens for c in taken),
        message_ids=tuple(mid for c in taken for mid in c.message_ids),
    )


def chunks_to_take(record: ObservationRecord, thread_id: str, count: int) -> tuple[BufferedChunk, ...]:
    """The chunks :func:`activate_chunks` moves for ``count`` (a caller revising the active
    observations against their lines reads them here)."""
    return tuple([c for c in record.buffered_chunks if c.thread_id == thread_id][:count])


def buffered_hints(record: ObservationRecord, thread_id: str, state: ThreadState) -> tuple[str | None, str | None]:
    """The hints as they stand after everything already observed or buffered for a thread: the
    newest of its chunks that has any, else the thread's (what a new buffer is told)."""
    for chunk in reversed(record.buffered_chunks):
        if chunk.thread_id == thread_id and chunk.current_task:
            return chunk.current_task, chunk.suggested_response
    return state.current_task, state.suggested_response


def absorb_covered_chunks(
    head: ObservationRecord, thread_id: str, *, through_seq: int, cursor: int
) -> ObservationRecord | None:
    """The head an observation of a thread's messages up to ``through_seq`` commits onto, or
    None when it no longer applies.

    The observation was made from a head whose cursor was ``cursor``. Chunks that a buffer
    appended meanwhile and that lie wholly inside the observed messages are replaced by it
    (dropped from the head); a moved cursor, or a chunk reaching past the observed messages,
    means another writer observed or buffered some of them first, and its work stands.
    """
    overlapping = [c for c in head.buffered_chunks if c.thread_id == thread_id and c.first_seq <= through_seq]
    if overlapping and all(c.last_seq <= through_seq for c in overlapping):
        head = head.model_copy(
            update={"buffered_chunks": tuple(c for c in head.buffered_chunks if c not in overlapping)}
        )
        overlapping = []
    if head.cursor(thread_id) != cursor or overlapping:
        return None
    return head


def reflection_slice(
    active: str, observation_tokens: int, budget_tokens: float, *, sections: bool = False
) -> tuple[str, int]:
    """The leading lines a background reflection condenses, and how many there are.

    ``lines = min(floor(budget / average tokens per line), all lines)``: the slice that will be
    reflected is about ``budget`` tokens, so lines appended while it runs are kept verbatim.
    Observation groups (retrieval mode) are never cut in two, nor (``sections``: resource
    scope) a thread's section: the slice is whole sections.
    """
    lines = active.split("\n")
    if not lines or observation_tokens <= 0:
        return "", 0
    average = observation_tokens / len(lines)
    count = min(len(lines), max(1, int(budget_tokens // max(average, 1e-9))))
    # In retrieval mode the slice ends between groups, never inside one (a no-op without groups).
    count = group_safe_line_count(lines, count)
    if sections:  # groups sit inside sections: a cut between sections is between groups too
        count = section_safe_line_count(lines, count)
    return "\n".join(lines[:count]), count


def apply_buffered_reflection(
    record: ObservationRecord,
    *,
    new_id: str,
    now: datetime,
    count_tokens: Callable[[str], int],
) -> ObservationRecord | None:
    """The successor generation from a stored buffered reflection, or None if there is none.

    The successor is the reflection followed by every line appended after the reflected slice,
    and it carries the head's cursors and chunks, so nothing observed or buffered is stranded.
    """
    buffered = record.buffered_reflection
    if buffered is None or not buffered.text.strip():
        return None
    remainder = "\n".join(record.active_observations.split("\n")[buffered.line_count:]).strip()
    active = buffered.text.strip() if not remainder else f"{buffered.text.strip()}\n\n{remainder}"
    return record.model_copy(
        update={
            "id": new_id,
            "generation": record.generation + 1,
            "origin": "reflection",
            "version": 1,
            "superseded_by": None,
            "active_observations": active,
            "observation_tokens": count_tokens(active),
            "buffered_reflection": None,
            "reflection_boundary_tokens": 0,
            "reflection_suppressed_at": None,
            "created_at": now,
            "updated_at": now,
        }
    )
