"""Which buffered chunks activation may use, and when a buffered reflection may go early.

Table tests of the chunk rules of ``obsmem.om.activation``: a chunk that ends between a call and
its result is broken (it and the chunks after it are dropped and observed again), the last chunk
taken must end where the unseen input stays raw, a chunk wholly at or before the cursor is stale
and may always go, and a chunk appended after the window was read is judged later.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from obsmem.om.activation import (
    ChunkBounds,
    absorb_covered_chunks,
    drop_chunks,
    early_reflection_allowed,
    usable_chunks,
)
from obsmem.om.selection import Unseen
from obsmem.storage.contract import BufferedChunk, BufferedReflection, ObservationRecord, ThreadState
from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart

T0 = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


def chunk(name: str, first: int, last: int, thread_id: str = "t1") -> BufferedChunk:
    return BufferedChunk(
        id=name, cycle_id=f"cyc-{name}", thread_id=thread_id, observations=f"* {name}", observation_tokens=3,
        message_ids=tuple(f"m{s}" for s in range(first, last + 1)), message_tokens=10,
        first_seq=first, last_seq=last, created_at=T0,
    )


def record(*chunks: BufferedChunk, cursor: int = 0, **fields: Any) -> ObservationRecord:
    base: dict[str, Any] = {
        "id": "omr_1", "lineage": "thread:t1", "scope": "thread", "thread_id": "t1", "resource_id": "u1",
        "generation": 1, "version": 1, "created_at": T0, "updated_at": T0,
        "threads": {"t1": ThreadState(cursor=cursor), "t2": ThreadState(cursor=100)},
        "buffered_chunks": chunks,
    }
    base.update(fields)
    return ObservationRecord(**base)


# --------------------------------------------------------------------------------------------
# ChunkBounds.of
# --------------------------------------------------------------------------------------------


def msg(seq: int | None, role: str = "user", *parts: Any) -> Message:
    return Message(role=role, parts=parts or (TextPart(text="x"),), seq=seq)  # type: ignore[arg-type]


def test_chunk_bounds_of_a_window() -> None:
    window = [
        msg(5), msg(6, "assistant", ToolCallPart(tool_call_id="a", tool_name="t")),
        msg(7, "tool", ToolResultPart(tool_call_id="a", tool_name="t")), msg(8, "assistant"), msg(9),
    ]
    assert ChunkBounds.of(window, Unseen(from_seq=9)) == ChunkBounds(
        valid=frozenset({5, 7, 8, 9}), allowed=frozenset({5, 7, 8}), known_until=9
    )
    assert ChunkBounds.of(window, Unseen(newest_user=True)).allowed == {5, 7, 8}
    assert ChunkBounds.of(window, Unseen()).allowed == {5, 7, 8, 9}


def test_chunk_bounds_of_an_empty_window() -> None:
    assert ChunkBounds.of([], Unseen()) == ChunkBounds(valid=frozenset(), allowed=frozenset(), known_until=0)
    assert ChunkBounds.of([msg(None)], Unseen()).known_until == 0  # not stored: nothing known


# --------------------------------------------------------------------------------------------
# usable_chunks
# --------------------------------------------------------------------------------------------

BOUNDS = ChunkBounds(valid=frozenset({2, 4, 6}), allowed=frozenset({2, 4}), known_until=6)
OTHER = chunk("other", 3, 3, "t2")  # another thread's chunk ending where t1 could not be cut


@pytest.mark.parametrize(
    ("chunks", "cursor", "bounds", "expected"),
    [
        pytest.param([chunk("a", 1, 2), chunk("b", 3, 4), chunk("c", 5, 6)], 0, BOUNDS, (2, 3),
                     id="the last usable chunk leaves the unseen input raw"),
        pytest.param([chunk("a", 1, 2), chunk("b", 3, 3), chunk("c", 4, 4)], 0, BOUNDS, (1, 1),
                     id="a chunk ending between a call and its result breaks the rest"),
        pytest.param([chunk("a", 1, 2), chunk("b", 3, 8)], 0, BOUNDS, (1, 2),
                     id="a chunk past the window read is judged later, not broken"),
        pytest.param([chunk("a", 1, 5)], 5, BOUNDS, (1, 1), id="a stale chunk ending at the cursor may go"),
        pytest.param([chunk("a", 1, 4), chunk("b", 5, 6)], 4, ChunkBounds(frozenset({2, 4, 6}), frozenset({2}), 6),
                     (1, 2), id="a stale chunk, then one that must wait"),
        pytest.param([chunk("a", 1, 2), chunk("b", 3, 4), chunk("c", 5, 6)], 0,
                     ChunkBounds(frozenset({2, 4, 6}), frozenset(), 6), (0, 3), id="nothing allowed"),
        pytest.param([], 0, BOUNDS, (0, 0), id="no chunks"),
    ],
)
def test_usable_chunks(
    chunks: list[BufferedChunk], cursor: int, bounds: ChunkBounds, expected: tuple[int, int]
) -> None:
    rec = record(OTHER, *chunks, cursor=cursor)
    assert usable_chunks(rec, "t1", bounds) == expected


# --------------------------------------------------------------------------------------------
# drop_chunks / absorb_covered_chunks
# --------------------------------------------------------------------------------------------

A, B, C = chunk("a", 1, 2), chunk("b", 3, 4), chunk("c", 5, 6)


@pytest.mark.parametrize(
    ("start", "left"),
    [
        pytest.param(0, (OTHER,), id="all of this thread's"),
        pytest.param(1, (A, OTHER), id="from the second on"),
        pytest.param(2, (A, OTHER, B), id="the last one"),
    ],
)
def test_drop_chunks_keeps_other_threads_and_the_prefix(start: int, left: tuple[BufferedChunk, ...]) -> None:
    rec = record(A, OTHER, B, C)
    dropped = drop_chunks(rec, "t1", start)
    assert dropped.buffered_chunks == left
    assert dropped.model_dump(exclude={"buffered_chunks"}) == rec.model_dump(exclude={"buffered_chunks"})


def test_dropping_nothing_returns_the_same_record() -> None:
    rec = record(A, OTHER)
    assert drop_chunks(rec, "t1", 1) is rec
    assert drop_chunks(rec, "t3", 0) is rec


@pytest.mark.parametrize(
    ("chunks", "through", "cursor", "left"),
    [
        pytest.param((A, OTHER, B), 4, 0, (OTHER,), id="chunks inside the observed messages are replaced"),
        pytest.param((A, OTHER), 4, 0, (OTHER,), id="a chunk ending before the observed end"),
        pytest.param((OTHER,), 4, 0, (OTHER,), id="nothing to absorb"),
        pytest.param((A, chunk("late", 4, 6)), 4, 0, None, id="a chunk starting at the observed end reaches past it"),
        pytest.param((A, C), 4, 0, (C,), id="a chunk wholly after the observed messages stays"),
        pytest.param((A,), 4, 3, None, id="the cursor moved since the observation started"),
    ],
)
def test_absorb_covered_chunks(
    chunks: tuple[BufferedChunk, ...], through: int, cursor: int, left: tuple[BufferedChunk, ...] | None
) -> None:
    head = record(*chunks, cursor=0)
    absorbed = absorb_covered_chunks(head, "t1", through_seq=through, cursor=cursor)
    if left is None:
        assert absorbed is None
    else:
        assert absorbed is not None and absorbed.buffered_chunks == left


# --------------------------------------------------------------------------------------------
# early_reflection_allowed
# --------------------------------------------------------------------------------------------


def chars(text: str) -> int:
    """A counter that sees every character, separators included."""
    return len(text)


def reflected(active: str, text: str, tokens: int, line_count: int) -> ObservationRecord:
    return record(
        active_observations=active,
        buffered_reflection=BufferedReflection(
            cycle_id="r1", text=text, tokens=tokens, input_tokens=50, line_count=line_count, created_at=T0
        ),
    )


ACTIVE = "old 1\nold 2\nnew line 1\nnew line 2\nnew line 3"  # the tail: 32 characters


@pytest.mark.parametrize(
    ("rec", "threshold", "activation", "allowed"),
    [
        pytest.param(record(active_observations=ACTIVE), 10, 0.0, False, id="no buffered reflection"),
        pytest.param(reflected(ACTIVE, "  ", 1, 2), 10, 0.0, False, id="a blank reflection"),
        pytest.param(reflected(ACTIVE, "r", 32, 2), 85, 0.0, True, id="tail as large as the reflection, size reached"),
        pytest.param(reflected(ACTIVE, "r", 33, 2), 10, 0.0, False, id="reflection larger than the tail"),
        pytest.param(reflected(ACTIVE, "r", 28, 2), 80, 0.0, True, id="size exactly 0.75 of the threshold"),
        pytest.param(reflected(ACTIVE, "r", 28, 2), 81, 0.0, False, id="size just under"),
        pytest.param(reflected(ACTIVE, "r", 28, 2), 100, 0.2, True, id="the window shrinks with buffer_activation"),
        pytest.param(reflected("old 1\nold 2", "r", 1, 2), 1, 0.0, False, id="nothing left uncovered"),
        pytest.param(reflected("old 1\nold 2\n\n  ", "r", 1, 2), 1, 0.0, False, id="only blank lines uncovered"),
    ],
)
def test_early_reflection_allowed(rec: ObservationRecord, threshold: int, activation: float, allowed: bool) -> None:
    assert early_reflection_allowed(rec, threshold, activation, chars) is allowed
