"""What activation writes, pinned on the pure transitions of ``obsmem.om.activation``.

These tests call the activation functions by their public names (``activate_chunks``,
``apply_buffered_reflection``, ``reflection_slice``, ``covered_until``, ``chunk_fits``) and the
prefix rule (``select_activation_prefix``, ``projected_message_removal``), which lives in
``obsmem.om.activation`` alone. When the activation rule moves or is renamed, this is the one file to adjust; the behaviour it
pins must not change.
Every field of the record that a transition writes is checked, and every field it must leave
alone is checked to be untouched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

import obsmem.om.activation
import obsmem.thresholds
from obsmem.errors import InvalidInputError

from obsmem.om.activation import (
    activate_chunks,
    apply_buffered_reflection,
    chunk_fits,
    covered_until,
    reflection_slice,
)
from obsmem.storage.contract import BufferedChunk, BufferedReflection, ObservationRecord, ThreadState
from obsmem.thresholds import TokenRange
from obsmem.types import Message, TextPart

T0 = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)
NOW = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)


def words(text: str) -> int:
    """A token counter that is easy to do by hand: one token per whitespace-separated word."""
    return len(text.split())


def chunk(
    n: int, thread_id: str = "t1", *, first: int, last: int, tokens: int = 100, extracted: dict[str, Any] | None = None
) -> BufferedChunk:
    return BufferedChunk(
        id=f"chunk{n}", cycle_id=f"cyc{n}", thread_id=thread_id,
        observations=f"* chunk {n} line", observation_tokens=4 + n,
        message_ids=tuple(f"m{s}" for s in range(first, last + 1)), message_tokens=tokens,
        first_seq=first, last_seq=last, created_at=T0 + timedelta(minutes=n), extracted=extracted or {},
    )


def record(**fields: Any) -> ObservationRecord:
    base: dict[str, Any] = {
        "id": "omr_1", "lineage": "thread:t1", "scope": "thread", "thread_id": "t1", "resource_id": "u1",
        "generation": 3, "version": 7, "created_at": T0, "updated_at": T0,
    }
    base.update(fields)
    return ObservationRecord(**base)


# --------------------------------------------------------------------------------------------
# covered_until / chunk_fits
# --------------------------------------------------------------------------------------------


def test_covered_until_is_the_cursor_or_the_last_buffered_seq_of_this_thread() -> None:
    rec = record(
        threads={"t1": ThreadState(cursor=5), "t2": ThreadState(cursor=40)},
        buffered_chunks=(chunk(1, first=6, last=9), chunk(2, "t2", first=41, last=60), chunk(3, first=10, last=12)),
    )
    assert covered_until(rec, "t1") == 12
    assert covered_until(rec, "t2") == 60
    assert covered_until(rec, "t3") == 0
    assert covered_until(record(threads={"t1": ThreadState(cursor=5)}), "t1") == 5


@pytest.mark.parametrize(
    ("first", "between", "fits"),
    [
        (13, 0, True),  # right after the covered point
        (20, 0, True),  # a gap with no observable message in it
        (20, 1, False),  # a gap holding an observable message
        (12, 0, False),  # overlaps the last buffered seq
        (3, 0, False),  # overlaps the cursor
    ],
)
def test_chunk_fits_only_without_gap_or_overlap(first: int, between: int, fits: bool) -> None:
    rec = record(threads={"t1": ThreadState(cursor=5)}, buffered_chunks=(chunk(1, first=6, last=12),))
    gap = [Message(role="user", parts=(TextPart(text="x"),), seq=14)] * between
    assert chunk_fits(rec, chunk(2, first=first, last=first + 3), gap) is fits


# --------------------------------------------------------------------------------------------
# activate_chunks
# --------------------------------------------------------------------------------------------


def _activation_record() -> ObservationRecord:
    return record(
        active_observations="* old line one\n* old line two",
        observation_tokens=8,
        total_tokens_observed=1000,
        pending_message_tokens=550,
        buffer_boundary_tokens=400,
        reflection_boundary_tokens=33,
        threads={
            "t1": ThreadState(
                cursor=5, current_task="old task", suggested_response="old reply", thread_title="Trip to Lisbon",
                extracted={"budget": 100, "city": "Lisbon"},
            ),
            "t2": ThreadState(cursor=77, thread_title="other", extracted={"x": 1}),
        },
        buffered_chunks=(
            chunk(1, first=6, last=9, tokens=120, extracted={"budget": 200}),
            chunk(2, "t2", first=78, last=80, tokens=999),
            chunk(3, first=10, last=14, tokens=130, extracted={"budget": 300, "hotel": "Memmo"}),
            chunk(4, first=15, last=20, tokens=140),
        ),
        metadata={"last_model": "openai:gpt-4o"},
    )


def test_activating_two_chunks_writes_exactly_what_they_carry() -> None:
    before = _activation_record()
    done = activate_chunks(before, "t1", 2, now=NOW, count_tokens=words)
    after = done.record

    expected_active = (
        "* old line one\n* old line two\n\n--- message boundary (2025-06-15T09:01:00+00:00) ---\n\n"
        "* chunk 1 line\n\n--- message boundary (2025-06-15T09:03:00+00:00) ---\n\n* chunk 3 line"
    )
    assert after.active_observations == expected_active
    assert after.observation_tokens == words(expected_active)
    assert after.total_tokens_observed == 1000 + 120 + 130
    assert after.pending_message_tokens == 550 - 250
    assert after.buffer_boundary_tokens == 0
    assert after.updated_at == NOW
    # only this thread's first two chunks go; the other thread's chunk and chunk 4 stay, in order
    assert [c.id for c in after.buffered_chunks] == ["chunk2", "chunk4"]

    state = after.threads["t1"]
    assert state.cursor == 14  # exactly the last seq of the last activated chunk
    assert state.current_task is None and state.suggested_response is None  # hints were for an older window
    assert state.thread_title == "Trip to Lisbon"  # the title survives
    assert state.extracted == {"budget": 300, "city": "Lisbon", "hotel": "Memmo"}  # later chunks win
    assert after.threads["t2"] == before.threads["t2"]

    # what activation must not touch
    for name in ("id", "lineage", "generation", "version", "origin", "created_at", "metadata",
                 "reflection_boundary_tokens", "buffered_reflection", "superseded_by"):
        assert getattr(after, name) == getattr(before, name), name

    assert [c.id for c in done.chunks] == ["chunk1", "chunk3"]
    assert done.message_tokens == 250
    assert done.observation_tokens == 5 + 7
    assert done.message_ids == ("m6", "m7", "m8", "m9", "m10", "m11", "m12", "m13", "m14")


def test_activation_on_an_empty_window_starts_the_text_without_a_boundary() -> None:
    before = record(buffered_chunks=(chunk(1, first=1, last=3, tokens=50),), pending_message_tokens=20)
    after = activate_chunks(before, "t1", 1, now=NOW, count_tokens=words).record
    assert after.active_observations == "* chunk 1 line"
    assert after.pending_message_tokens == 0  # never below zero
    assert after.threads["t1"] == ThreadState(cursor=3)  # a thread without state gets a fresh one


def test_activation_never_moves_the_cursor_backward() -> None:
    before = record(threads={"t1": ThreadState(cursor=50)}, buffered_chunks=(chunk(1, first=6, last=9),))
    assert activate_chunks(before, "t1", 1, now=NOW, count_tokens=words).record.cursor("t1") == 50


def test_activating_nothing_returns_the_record_unchanged() -> None:
    before = _activation_record()
    for thread_id, count in (("t1", 0), ("t9", 3)):
        done = activate_chunks(before, thread_id, count, now=NOW, count_tokens=words)
        assert done.record is before
        assert (done.chunks, done.message_tokens, done.observation_tokens, done.message_ids) == ((), 0, 0, ())


def test_activating_more_chunks_than_stored_takes_all_of_this_thread() -> None:
    done = activate_chunks(_activation_record(), "t1", 10, now=NOW, count_tokens=words)
    assert [c.id for c in done.record.buffered_chunks] == ["chunk2"]
    assert done.record.cursor("t1") == 20


# --------------------------------------------------------------------------------------------
# reflection_slice
# --------------------------------------------------------------------------------------------

TEN_LINES = "\n".join(f"* line {i}" for i in range(10))  # 10 lines


@pytest.mark.parametrize(
    ("tokens", "budget", "count"),
    [
        (100, 30, 3),  # 10 tokens a line: 30 tokens of budget is 3 lines
        (100, 35, 3),  # floor, not round
        (100, 1000, 10),  # never more than every line
        (100, 5, 1),  # at least one line
        (100, 0, 1),
        (50, 30, 6),  # 5 tokens a line
        (5, 2, 4),  # half a token a line: 2 tokens of budget is 4 lines
        (1, 100, 10),  # a single token of observations is still something to reflect
    ],
)
def test_reflection_slice_takes_budget_worth_of_leading_lines(tokens: int, budget: float, count: int) -> None:
    text, lines = reflection_slice(TEN_LINES, tokens, budget)
    assert lines == count
    assert text == "\n".join(TEN_LINES.split("\n")[:count])


def test_reflection_slice_of_nothing_is_empty() -> None:
    assert reflection_slice(TEN_LINES, 0, 100) == ("", 0)
    assert reflection_slice(TEN_LINES, -5, 100) == ("", 0)


def test_reflection_slice_never_cuts_a_group_in_two() -> None:
    grouped = "\n".join(
        ["* loose line", '<observation-group id="g1" thread="t1" range="1:2">', "* grouped a", "* grouped b",
         "</observation-group>", "* tail"]
    )
    # 2 lines of budget would end inside the group: the slice stops before it
    assert reflection_slice(grouped, 60, 20) == ("* loose line", 1)


# --------------------------------------------------------------------------------------------
# apply_buffered_reflection
# --------------------------------------------------------------------------------------------


def _reflection_record(text: str = "* condensed A\n* condensed B", line_count: int = 3) -> ObservationRecord:
    return record(
        active_observations="* a1\n* a2\n* a3\n* appended while reflecting\n* and one more",
        observation_tokens=99,
        total_tokens_observed=4321,
        pending_message_tokens=17,
        buffer_boundary_tokens=12,
        reflection_boundary_tokens=80,
        reflection_suppressed_at=90,
        threads={"t1": ThreadState(cursor=44, current_task="task", thread_title="Title", extracted={"k": "v"})},
        buffered_chunks=(chunk(1, first=45, last=50),),
        buffered_reflection=BufferedReflection(
            cycle_id="rbuf1", text=f"\n  {text}  \n", tokens=6, input_tokens=9, line_count=line_count, created_at=T0
        ),
        metadata={"last_model": "anthropic:claude"},
        superseded_by=None,
    )


def test_a_buffered_reflection_becomes_the_next_generation_with_the_unreflected_tail() -> None:
    before = _reflection_record()
    after = apply_buffered_reflection(before, new_id="omr_2", now=NOW, count_tokens=words)
    assert after is not None
    expected = "* condensed A\n* condensed B\n\n* appended while reflecting\n* and one more"
    assert after.active_observations == expected  # the reflected *text* is stored, not only its size
    assert after.observation_tokens == words(expected)
    assert after.id == "omr_2"
    assert after.generation == before.generation + 1
    assert after.origin == "reflection"
    assert after.version == 1
    assert after.superseded_by is None
    assert after.buffered_reflection is None
    assert after.reflection_boundary_tokens == 0
    assert after.reflection_suppressed_at is None
    assert after.created_at == NOW and after.updated_at == NOW
    # everything observed or buffered is carried over to the successor
    for name in ("threads", "buffered_chunks", "total_tokens_observed", "pending_message_tokens",
                 "buffer_boundary_tokens", "lineage", "scope", "thread_id", "resource_id", "metadata", "config"):
        assert getattr(after, name) == getattr(before, name), name


def test_the_successor_is_always_live() -> None:
    # built from a copy read just before the head was retired, the successor still starts live
    retired = _reflection_record().model_copy(update={"superseded_by": "omr_other"})
    after = apply_buffered_reflection(retired, new_id="omr_2", now=NOW, count_tokens=words)
    assert after is not None and after.superseded_by is None and after.is_live


def test_a_buffered_reflection_over_every_line_is_the_whole_successor() -> None:
    after = apply_buffered_reflection(_reflection_record(line_count=5), new_id="n", now=NOW, count_tokens=words)
    assert after is not None and after.active_observations == "* condensed A\n* condensed B"
    assert after.observation_tokens == 6


@pytest.mark.parametrize("text", ["", "   \n  "])
def test_a_blank_buffered_reflection_is_not_applied(text: str) -> None:
    assert apply_buffered_reflection(_reflection_record(text=text), new_id="n", now=NOW, count_tokens=words) is None


def test_no_buffered_reflection_nothing_to_apply() -> None:
    plain = _reflection_record().model_copy(update={"buffered_reflection": None})
    assert apply_buffered_reflection(plain, new_id="n", now=NOW, count_tokens=words) is None


# --------------------------------------------------------------------------------------------
# select_activation_prefix / projected_message_removal (the "how much" of activation)
# --------------------------------------------------------------------------------------------

PREFIX_RULES = [
    module for module in (obsmem.om.activation,)
    if hasattr(module, "select_activation_prefix") and hasattr(module, "projected_message_removal")
]
assert PREFIX_RULES, "the prefix rule is in obsmem.om.activation"


@pytest.fixture(params=PREFIX_RULES, ids=lambda module: module.__name__)
def rule(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.param
    return module



@pytest.mark.parametrize(
    ("chunks", "ratio", "threshold", "pending", "force", "expected"),
    [
        # floor = 10000 × (1 − 0.8) = 2000; target = 12000 − 2000 = 10000; minimum left = 1000
        pytest.param([5000, 5500], 0.8, 10_000, 12_000, False, 2, id="over within the overshoot guard"),
        pytest.param([6000, 6000], 0.8, 10_000, 12_000, False, 1, id="over leaves nothing: under"),
        pytest.param([6000, 5000], 0.8, 10_000, 12_000, False, 2, id="over leaves exactly the minimum"),
        # floor = 30000, so the 95 % overshoot guard (28500) is stricter than the minimum left
        pytest.param([60_000, 38_500], 0.7, 100_000, 100_000, False, 2, id="overshoot exactly 95 % of the floor"),
        pytest.param([60_000, 39_000], 0.7, 100_000, 100_000, False, 1, id="overshoot past 95 %: under"),
        pytest.param([60_000, 39_000], 0.7, 100_000, 100_000, True, 2, id="force: over when it leaves the minimum"),
        pytest.param([60_000, 40_000], 0.7, 100_000, 100_000, True, 1, id="force never leaves less than it"),
        pytest.param([11_500], 0.8, 10_000, 12_000, False, 1, id="over alone, even if it leaves little"),
        pytest.param([500, 500, 500], 0.8, 10_000, 1500, False, 1, id="within the floor: the first chunk"),
        pytest.param([3000, 3000, 3000], 4000, 10_000, 12_000, False, 3, id="absolute floor from 1000 up"),
        pytest.param([1500, 1500], 20_000, 10_000, 12_000, False, 2, id="absolute floor capped at the threshold"),
        pytest.param([5000, 5000, 2000], 0.8, TokenRange(5000, 10_000), 12_000, False, 2, id="range: its max"),
        pytest.param([], 0.8, 10_000, 12_000, False, 0, id="no chunks"),
    ],
)
def test_select_activation_prefix_table(
    rule: ModuleType, chunks: list[int], ratio: float, threshold: int | TokenRange, pending: int, force: bool,
    expected: int,
) -> None:
    assert rule.select_activation_prefix(chunks, ratio, threshold, pending, force_max=force) == expected


def test_select_activation_prefix_refuses_negative_counts(rule: ModuleType) -> None:
    with pytest.raises(InvalidInputError):
        rule.select_activation_prefix([10, -1], 0.8, 10_000, 12_000)


def test_activation_is_not_forced_unless_asked(rule: ModuleType) -> None:
    # over would leave exactly the minimum but overshoots the 95 % guard: only force takes it
    chunks = [60_000, 39_000]
    assert rule.select_activation_prefix(chunks, 0.7, 100_000, 100_000) == 1
    assert rule.select_activation_prefix(chunks, 0.7, 100_000, 100_000, force_max=True) == 2


def test_an_absolute_floor_with_a_zero_threshold_keeps_nothing(rule: ModuleType) -> None:
    # the shared budget can leave messages a zero threshold; the floor is capped at it
    assert rule.select_activation_prefix([5, 5], 2000, 0, 10) == 2


@pytest.mark.parametrize(
    ("chunks", "pending", "expected"),
    [
        ([4000, 4000, 4000], 12_000, 8000),
        ([6000, 6000], 12_000, 6000),
        ([500, 500], 2000, 0),  # within the floor: nothing needs removing
        ([500, 500], 2001, 500),
        ([], 12_000, 0),
    ],
)
def test_projected_message_removal_table(rule: ModuleType, chunks: list[int], pending: int, expected: int) -> None:
    assert rule.projected_message_removal(chunks, 0.8, 10_000, pending) == expected
