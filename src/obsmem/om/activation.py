"""Buffered chunks and buffered reflections: pure transitions on a stored record.

A chunk is an observation made early over an exact run of messages; *activation* moves a prefix
of the stored chunks into the active observations and advances the cursor past the messages
they cover. These functions take the record as stored and return the next one, so the engine
can compare-and-set the result and, when the write is stale, recompute from the new head:
activation never works from a stale copy, never moves a cursor backward, and never drops a
chunk that was appended concurrently (it only ever removes the prefix it activated).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from obsmem.om.text.format import append_with_boundary
from obsmem.om.text.groups import group_safe_line_count
from obsmem.storage.contract import BufferedChunk, ObservationRecord, ThreadState
from obsmem.types import Message

__all__ = [
    "ActivatedChunks",
    "activate_chunks",
    "apply_buffered_reflection",
    "chunk_fits",
    "covered_until",
    "reflection_slice",
]


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
) -> ActivatedChunks:
    """Move the first ``count`` chunks of this thread into the active observations.

    Hints (current task, suggested response) were written for an older window, and buffered
    chunks carry none, so activation clears them; the next synchronous cycle sets fresh ones.
    """
    mine = [c for c in record.buffered_chunks if c.thread_id == thread_id]
    taken = tuple(mine[:count])
    if not taken:
        return ActivatedChunks(record, (), 0, 0, ())
    taken_ids = {c.id for c in taken}
    active = record.active_observations
    for chunk in taken:
        active = append_with_boundary(active, chunk.observations, chunk.created_at)
    state = record.threads.get(thread_id, ThreadState())
    extracted = dict(state.extracted)
    for chunk in taken:
        extracted.update(chunk.extracted)
    new_state = state.model_copy(
        update={
            "cursor": max(state.cursor, taken[-1].last_seq),
            "current_task": None,
            "suggested_response": None,
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


def reflection_slice(active: str, observation_tokens: int, budget_tokens: float) -> tuple[str, int]:
    """The leading lines a background reflection condenses, and how many there are.

    ``lines = min(floor(budget / average tokens per line), all lines)``: the slice that will be
    reflected is about ``budget`` tokens, so lines appended while it runs are kept verbatim.
    Observation groups (retrieval mode) are never cut in two.
    """
    lines = active.split("\n")
    if not lines or observation_tokens <= 0:
        return "", 0
    average = observation_tokens / len(lines)
    count = min(len(lines), max(1, int(budget_tokens // max(average, 1e-9))))
    # In retrieval mode the slice ends between groups, never inside one (a no-op without groups).
    count = group_safe_line_count(lines, count)
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
