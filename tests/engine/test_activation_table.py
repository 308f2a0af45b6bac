"""The activation rule (``om/activation.py``), as tables: when, how much, and what it writes.

Everything here is pure: records in, records (or numbers) out. The record-content tests pin
every field a transition writes, so a rule that forgets one (the thread's title, the extracted
values, the generation bump, the reflected text) fails here rather than somewhere downstream.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem.errors import InvalidInputError
from obsmem.om.activation import (
    ThresholdAction,
    absorb_covered_chunks,
    activate_chunks,
    activation_floor,
    apply_buffered_reflection,
    chunk_fits,
    chunks_to_activate,
    covered_until,
    early_reflection_allowed,
    idle_expired,
    model_changed,
    projected_message_removal,
    reflection_slice,
    select_activation_prefix,
    threshold_action,
)
from obsmem.storage.contract import BufferedChunk, BufferedReflection, ObservationRecord, ThreadState
from obsmem.thresholds import TokenRange
from obsmem.types import Message, TextPart

EARLIER = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)
NOW = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)
CHUNK_AT = datetime(2025, 6, 15, 10, 30, tzinfo=UTC)


def words(text: str) -> int:
    return len(text.split())


def chunk(
    cid: str, first: int, last: int, *, thread: str = "t1", tokens: int = 100, text: str | None = None,
    extracted: dict[str, object] | None = None,
) -> BufferedChunk:
    return BufferedChunk(
        id=cid, cycle_id=f"buf-{cid}", thread_id=thread, observations=text if text is not None else f"* obs {cid}",
        observation_tokens=tokens // 10, message_ids=tuple(f"m{i}" for i in range(first, last + 1)),
        message_tokens=tokens, first_seq=first, last_seq=last, created_at=CHUNK_AT, extracted=extracted or {},
    )


def record(**fields: object) -> ObservationRecord:
    base: dict[str, object] = {
        "id": "omr_1", "lineage": "thread:t1", "scope": "thread", "thread_id": "t1", "resource_id": "u1",
        "created_at": EARLIER, "updated_at": EARLIER,
    }
    return ObservationRecord.model_validate({**base, **fields})


# ---- the prefix choice (§3.5 step 6) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "activation", "threshold", "pending", "force_max", "expected"),
    [
        pytest.param([], 0.7, 30_000, 25_000, False, 0, id="no chunks"),
        pytest.param([10_000, 89_000], 0.7, 100_000, 100_000, True, 2, id="(a) force takes over"),
        pytest.param([10_000, 89_000], 0.7, 100_000, 100_000, False, 1, id="(c) without force"),
        pytest.param([10_000, 89_001], 0.7, 100_000, 100_000, True, 1, id="(a) skipped: 999 would remain"),
        pytest.param([10_000, 99_500], 0.7, 100_000, 100_000, True, 1, id="(a) skipped: too little left"),
        pytest.param([8_000, 9_000], 0.7, 30_000, 25_000, False, 2, id="(b) over within overshoot"),
        pytest.param([3_000, 25_000], 0.7, 30_000, 25_000, False, 1, id="(c) under"),
        pytest.param([5_000, 5_000, 5_000], 0.7, 30_000, 25_000, False, 3, id="(c) all under"),
        pytest.param([30_000], 0.7, 30_000, 30_000, False, 1, id="(d) only over, overshoot too big"),
        pytest.param([30_000], 0.7, 30_000, 30_000, True, 1, id="(d) force, nothing would remain"),
        pytest.param([5_000, 5_000], 0.7, 30_000, 5_000, False, 1, id="within floor: still one chunk"),
        pytest.param([0, 20_000], 0.7, 30_000, 25_000, False, 2, id="zero-token first chunk"),
        pytest.param([17_000, 0], 0.7, 30_000, 25_000, False, 1, id="smallest prefix on ties"),
        pytest.param([4_000, 4_000, 4_000], 5_000, 30_000, 15_000, False, 3, id="absolute floor"),
        pytest.param([10_000, 10_000], 50_000, 30_000, 40_000, False, 1, id="floor capped at the threshold"),
        # Floor 30000: an overshoot of exactly 95 % (28500) is still accepted, one more is not.
        pytest.param([40_000, 58_500], 0.7, 100_000, 100_000, False, 2, id="(b) overshoot at the 95 % limit"),
        pytest.param([40_000, 58_501], 0.7, 100_000, 100_000, False, 1, id="(c) overshoot just past 95 %"),
        pytest.param([6_000] * 5, 0.8, 30_000, 30_000, False, 4, id="defaults keep about the floor"),
        pytest.param([6_000] * 5, 0.8, TokenRange(20_000, 30_000), 30_000, False, 4, id="range: its max"),
    ],
)
def test_select_activation_prefix(
    chunks: list[int], activation: float, threshold: int | TokenRange, pending: int, force_max: bool, expected: int
) -> None:
    assert select_activation_prefix(chunks, activation, threshold, pending, force_max=force_max) == expected


def test_select_activation_prefix_rejects_negative_chunk_sizes() -> None:
    with pytest.raises(InvalidInputError):
        select_activation_prefix([5_000, -1], 0.7, 30_000, 25_000)


@pytest.mark.parametrize(
    ("activation", "threshold", "expected"),
    [
        (0.7, 30_000, 9_000),
        (0.8, 30_000, 6_000),
        (1.0, 30_000, 0),
        (5_000, 30_000, 5_000),
        (50_000, 30_000, 30_000),  # an absolute floor never exceeds the threshold
        (0.5, TokenRange(10_000, 70_000), 35_000),
    ],
)
def test_activation_floor(activation: float, threshold: int | TokenRange, expected: int) -> None:
    assert activation_floor(activation, threshold) == expected


@pytest.mark.parametrize(
    ("chunks", "activation", "pending", "expected"),
    [
        pytest.param([], 0.7, 25_000, 0, id="no chunks"),
        pytest.param([5_000, 5_000], 0.7, 5_000, 0, id="pending within the floor"),
        pytest.param([5_000], 0.7, 9_000, 0, id="pending exactly at the floor"),
        pytest.param([5_000, 5_000, 5_000], 0.7, 25_000, 15_000, id="all under the target"),
        pytest.param([8_000, 9_000], 0.7, 25_000, 17_000, id="over within the overshoot"),
        pytest.param([3_000, 25_000], 0.7, 25_000, 3_000, id="under"),
        pytest.param([4_000, 4_000, 4_000], 5_000, 15_000, 12_000, id="absolute floor"),
    ],
)
def test_projected_message_removal(chunks: list[int], activation: float, pending: int, expected: int) -> None:
    assert projected_message_removal(chunks, activation, 30_000, pending) == expected


@pytest.mark.parametrize(
    ("block_after", "pending", "expected"),
    [
        pytest.param(None, 100_000, 1, id="no block_after: the normal choice"),
        pytest.param(100_001, 100_000, 1, id="below block_after: the normal choice"),
        pytest.param(100_000, 100_000, 2, id="at block_after: forced to the larger prefix"),
        pytest.param(90_000, 100_000, 2, id="past block_after: forced"),
    ],
)
def test_chunks_to_activate_forces_the_larger_prefix_from_block_after(
    block_after: int | None, pending: int, expected: int
) -> None:
    assert chunks_to_activate([10_000, 89_000], 0.7, 100_000, pending, block_after) == expected


# ---- when: at the threshold ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pending", "has_chunks", "in_flight", "block_after", "expected"),
    [
        pytest.param(999, True, True, None, "none", id="under the threshold: nothing"),
        pytest.param(1_000, True, False, None, "activate", id="at the threshold with chunks"),
        pytest.param(5_000, True, True, 2_000, "activate", id="chunks first, whatever else"),
        pytest.param(1_000, False, False, 2_000, "observe", id="no chunks, nothing in flight"),
        pytest.param(1_000, False, True, 2_000, "wait", id="a buffer in flight, under block_after"),
        pytest.param(1_999, False, True, 2_000, "wait", id="just under block_after"),
        pytest.param(2_000, False, True, 2_000, "observe", id="at block_after: block"),
        pytest.param(1_500, False, True, None, "observe", id="no block_after: never wait"),
    ],
)
def test_threshold_action(
    pending: int, has_chunks: bool, in_flight: bool, block_after: int | None, expected: ThresholdAction
) -> None:
    action = threshold_action(
        pending, 1_000, has_chunks=has_chunks, buffer_in_flight=in_flight, block_after=block_after
    )
    assert action == expected


# ---- when: early, at a turn's start -------------------------------------------------------------


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        (("openai", "gpt-4o"), ("openai", "gpt-4o"), False),
        (("openai", "gpt-4o"), ("openai", "gpt-4o-mini"), True),
        (("", "gpt-4o"), ("openai", "gpt-4o"), False),  # one provider unknown: same model
        (("openai", "gpt-4o"), ("", "gpt-4o"), False),
        (("openai", "gpt-4o"), ("azure", "gpt-4o"), True),  # both known and different
        (("", "gpt-4o"), ("", "claude-sonnet-4"), True),
    ],
)
def test_model_changed(previous: tuple[str, str], current: tuple[str, str], expected: bool) -> None:
    assert model_changed(previous, current) is expected


@pytest.mark.parametrize(
    ("idle_s", "ttl_s", "expected"),
    [(299.9, 300.0, False), (300.0, 300.0, True), (301.0, 300.0, True), (10_000.0, None, False), (0.0, 0.0, True)],
)
def test_idle_expired(idle_s: float, ttl_s: float | None, expected: bool) -> None:
    assert idle_expired(idle_s, ttl_s) is expected


def reflected(active_lines: list[str], *, text: str, line_count: int) -> ObservationRecord:
    active = "\n".join(active_lines)
    return record(
        active_observations=active,
        observation_tokens=words(active),
        buffered_reflection=BufferedReflection(
            cycle_id="rbuf-1", text=text, tokens=words(text), input_tokens=10, line_count=line_count,
            created_at=EARLIER,
        ),
    )


@pytest.mark.parametrize(
    ("tail_words", "reflection_words", "threshold", "expected"),
    [
        # size floor: 0.75 × 100 × (1 − 0.5) = 37.5 tokens
        pytest.param(30, 10, 100, True, id="tail >= reflection, combined 40 >= 37.5"),
        pytest.param(10, 30, 100, False, id="composition: tail smaller than the reflection"),
        pytest.param(20, 20, 100, True, id="composition at equality, combined 40"),
        pytest.param(20, 10, 100, False, id="size: combined 30 < 37.5"),
        pytest.param(28, 10, 100, True, id="size: combined 38 >= 37.5"),
        pytest.param(27, 10, 100, False, id="size: combined 37 < 37.5"),
        pytest.param(30, 10, 120, False, id="size: a larger threshold raises the floor to 45"),
    ],
)
def test_early_reflection_guards(tail_words: int, reflection_words: int, threshold: int, expected: bool) -> None:
    head = ["* reflected " + "x " * 20, "* reflected too"]
    tail = ["* " + " ".join(["tail"] * (tail_words - 1))]
    rec = reflected(head + tail, text=" ".join(["r"] * reflection_words), line_count=len(head))
    assert early_reflection_allowed(rec, threshold, 0.5, words) is expected


def test_early_reflection_needs_a_buffered_reflection() -> None:
    assert not early_reflection_allowed(record(active_observations="* a\n* b"), 10, 0.5, words)
    blank = reflected(["* a", "* b " * 30], text="   ", line_count=1)
    assert not early_reflection_allowed(blank, 10, 0.5, words)


# ---- coverage ------------------------------------------------------------------------------------


def test_covered_until_is_the_cursor_or_the_last_buffered_seq() -> None:
    rec = record(threads={"t1": ThreadState(cursor=4), "t2": ThreadState(cursor=9)})
    assert covered_until(rec, "t1") == 4
    with_chunks = rec.model_copy(update={"buffered_chunks": (chunk("a", 5, 7), chunk("b", 8, 12, thread="t2"))})
    assert covered_until(with_chunks, "t1") == 7
    assert covered_until(with_chunks, "t2") == 12
    assert covered_until(with_chunks, "t3") == 0


def test_chunk_fits_only_right_after_the_coverage_with_nothing_between() -> None:
    rec = record(threads={"t1": ThreadState(cursor=4)}, buffered_chunks=(chunk("a", 5, 7),))
    assert chunk_fits(rec, chunk("b", 8, 9), [])
    assert chunk_fits(rec, chunk("b", 10, 11), [])  # non-observable messages between: fits
    gap = Message(id="m9", role="user", parts=(TextPart(text="hi"),), created_at=EARLIER, seq=9)
    assert not chunk_fits(rec, chunk("b", 10, 11), [gap])
    assert not chunk_fits(rec, chunk("b", 7, 9), [])  # overlaps the stored chunk


@pytest.mark.parametrize(
    ("chunks", "cursor_now", "expected_ids"),
    [
        pytest.param((), 4, (), id="nothing landed: the head as it is"),
        pytest.param((chunk("a", 5, 8),), 4, (), id="a chunk inside the batch is replaced"),
        pytest.param((chunk("a", 5, 10),), 4, (), id="a chunk ending at the batch end is replaced"),
        pytest.param((chunk("a", 5, 11),), 4, None, id="a chunk reaching past the batch: superseded"),
        pytest.param((chunk("a", 11, 12),), 4, ("a",), id="a chunk after the batch stays"),
        pytest.param((chunk("a", 5, 6, thread="t2"),), 4, ("a",), id="another thread's chunk stays"),
        pytest.param((), 6, None, id="the cursor moved: superseded"),
        pytest.param((chunk("a", 5, 8), chunk("b", 9, 14)), 4, None, id="one chunk past: superseded"),
    ],
)
def test_absorb_covered_chunks(
    chunks: tuple[BufferedChunk, ...], cursor_now: int, expected_ids: tuple[str, ...] | None
) -> None:
    head = record(threads={"t1": ThreadState(cursor=cursor_now)}, buffered_chunks=chunks, version=7)
    absorbed = absorb_covered_chunks(head, "t1", through_seq=10, cursor=4)
    if expected_ids is None:
        assert absorbed is None
        return
    assert absorbed is not None
    assert tuple(c.id for c in absorbed.buffered_chunks) == expected_ids
    assert absorbed.version == 7 and absorbed.active_observations == head.active_observations


# ---- what activation writes ----------------------------------------------------------------------


def stored_with_chunks() -> ObservationRecord:
    return record(
        active_observations="* earlier",
        observation_tokens=2,
        total_tokens_observed=500,
        pending_message_tokens=450,
        buffer_boundary_tokens=300,
        threads={
            "t1": ThreadState(
                cursor=4, current_task="old task", suggested_response="old reply", thread_title="Trip to Oslo",
                extracted={"mood": "calm", "plan": "v1"},
            ),
        },
        buffered_chunks=(
            chunk("a", 5, 7, tokens=200, text="* chunk a", extracted={"plan": "v2"}),
            chunk("x", 5, 6, thread="t2", tokens=50),
            chunk("b", 8, 9, tokens=100, text="* chunk b", extracted={"city": "Oslo"}),
        ),
        generation=3,
        version=5,
    )


def test_activating_one_chunk_writes_exactly_this() -> None:
    before = stored_with_chunks()
    activated = activate_chunks(before, "t1", 1, now=NOW, count_tokens=words)
    after = activated.record
    boundary = f"--- message boundary ({CHUNK_AT.isoformat()}) ---"
    assert after.active_observations == f"* earlier\n\n{boundary}\n\n* chunk a"
    assert after.observation_tokens == words(after.active_observations)
    assert after.total_tokens_observed == 700
    assert after.pending_message_tokens == 250
    assert after.buffer_boundary_tokens == 0
    assert after.updated_at == NOW
    assert [c.id for c in after.buffered_chunks] == ["x", "b"], "only the activated prefix goes"
    state = after.threads["t1"]
    assert state.cursor == 7
    assert state.current_task is None and state.suggested_response is None, "hints were for an older window"
    assert state.thread_title == "Trip to Oslo", "the title survives activation"
    assert state.extracted == {"mood": "calm", "plan": "v2"}, "chunk values merge over the stored ones"
    # What a commit compares and sets on: same record, same version, same generation.
    assert (after.id, after.version, after.generation) == (before.id, before.version, before.generation)
    assert activated.chunks == (before.buffered_chunks[0],)
    assert (activated.message_tokens, activated.observation_tokens) == (200, 20)
    assert activated.message_ids == ("m5", "m6", "m7")


def test_activating_every_chunk_of_a_thread() -> None:
    activated = activate_chunks(stored_with_chunks(), "t1", 2, now=NOW, count_tokens=words)
    after = activated.record
    assert after.active_observations.endswith("* chunk a\n\n" + f"--- message boundary ({CHUNK_AT.isoformat()}) ---"
                                              "\n\n* chunk b")
    assert after.threads["t1"].cursor == 9
    assert after.threads["t1"].extracted == {"mood": "calm", "plan": "v2", "city": "Oslo"}
    assert [c.id for c in after.buffered_chunks] == ["x"]
    assert after.pending_message_tokens == 150 and after.total_tokens_observed == 800
    assert activated.message_ids == ("m5", "m6", "m7", "m8", "m9")


def test_activation_never_moves_a_cursor_back_and_ignores_other_threads() -> None:
    before = stored_with_chunks()
    ahead = before.model_copy(update={"threads": {"t1": before.threads["t1"].model_copy(update={"cursor": 20})}})
    assert activate_chunks(ahead, "t1", 1, now=NOW, count_tokens=words).record.threads["t1"].cursor == 20
    nothing = activate_chunks(before, "t3", 1, now=NOW, count_tokens=words)
    assert nothing.record is before and nothing.chunks == () and nothing.message_ids == ()


def test_activating_into_empty_observations_adds_no_boundary() -> None:
    before = stored_with_chunks().model_copy(update={"active_observations": "", "observation_tokens": 0})
    assert activate_chunks(before, "t1", 1, now=NOW, count_tokens=words).record.active_observations == "* chunk a"


def test_applying_a_buffered_reflection_writes_exactly_this() -> None:
    before = record(
        active_observations="* one\n* two\n* three\n* four",
        observation_tokens=8,
        generation=2,
        version=9,
        origin="initial",
        superseded_by=None,
        threads={"t1": ThreadState(cursor=12, thread_title="Trip")},
        buffered_chunks=(chunk("a", 13, 14),),
        buffered_reflection=BufferedReflection(
            cycle_id="rbuf-1", text="  * one and two  ", tokens=4, input_tokens=4, line_count=2, created_at=EARLIER
        ),
        reflection_boundary_tokens=8,
        reflection_suppressed_at=8,
    )
    after = apply_buffered_reflection(before, new_id="omr_2", now=NOW, count_tokens=words)
    assert after is not None
    assert after.active_observations == "* one and two\n\n* three\n* four", "the reflected text is stored"
    assert after.observation_tokens == words(after.active_observations)
    assert (after.id, after.generation, after.version, after.origin) == ("omr_2", 3, 1, "reflection")
    assert after.superseded_by is None and after.buffered_reflection is None
    assert after.reflection_boundary_tokens == 0 and after.reflection_suppressed_at is None
    assert after.created_at == NOW and after.updated_at == NOW
    assert after.threads == before.threads and after.buffered_chunks == before.buffered_chunks
    assert after.lineage == before.lineage


def test_a_reflection_covering_every_line_leaves_no_remainder() -> None:
    before = reflected(["* a", "* b"], text="* ab", line_count=2)
    after = apply_buffered_reflection(before, new_id="n", now=NOW, count_tokens=words)
    assert after is not None and after.active_observations == "* ab"


def test_no_buffered_reflection_applies_nothing() -> None:
    assert apply_buffered_reflection(record(), new_id="n", now=NOW, count_tokens=words) is None
    blank = reflected(["* a"], text=" \n ", line_count=1)
    assert apply_buffered_reflection(blank, new_id="n", now=NOW, count_tokens=words) is None


@pytest.mark.parametrize(
    ("lines", "tokens", "budget", "expected_count"),
    [
        pytest.param(10, 100, 50, 5, id="half the budget: half the lines"),
        pytest.param(10, 100, 1_000, 10, id="never more than every line"),
        pytest.param(10, 100, 1, 1, id="at least one line"),
        pytest.param(4, 100, 74, 2, id="floor of budget / tokens per line"),
        pytest.param(4, 0, 74, 0, id="no tokens: nothing"),
    ],
)
def test_reflection_slice(lines: int, tokens: int, budget: float, expected_count: int) -> None:
    active = "\n".join(f"* line {i}" for i in range(lines))
    text, count = reflection_slice(active, tokens, budget)
    assert count == expected_count
    assert text == "\n".join(active.split("\n")[:expected_count])
