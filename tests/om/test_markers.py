"""Marker payloads and durations (reference §9.6), with the clock frozen at 2025-06-15T12:00:00Z."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem.clock import FakeClock
from obsmem.om import markers
from obsmem.types import Message, ToolCallPart, ToolResultPart

FROZEN = datetime(2025, 6, 15, 12, 0, 0, tzinfo=UTC)
CONFIG = markers.MarkerConfig(message_tokens=30_000, observation_tokens=40_000, scope="thread")


def test_observation_start_marker_fields() -> None:
    part = markers.observation_start_marker(
        cycle_id="c1", operation="observation", record_id="r1", thread_id="t1",
        started_at=FROZEN, tokens_to_observe=1234, config=CONFIG,
    )
    assert part.name == "om-observation-start"
    assert part.data == {
        "cycle_id": "c1", "operation_type": "observation", "record_id": "r1", "thread_id": "t1",
        "started_at": "2025-06-15T12:00:00+00:00", "tokens_to_observe": 1234, "thread_ids": ["t1"],
        "config": {"message_tokens": 30_000, "observation_tokens": 40_000, "scope": "thread"},
    }


def test_start_marker_lists_every_thread_of_a_batch() -> None:
    part = markers.observation_start_marker(
        cycle_id="c", operation="observation", record_id="r", thread_id=None, started_at=FROZEN,
        tokens_to_observe=1, config=CONFIG, thread_ids=["a", "b"],
    )
    assert part.data["thread_ids"] == ["a", "b"]


@pytest.mark.parametrize(("offset_s", "expected_ms"), [(3, 3000), (0, 0), (1.5, 1500)])
def test_end_marker_duration(offset_s: float, expected_ms: int) -> None:
    part = markers.observation_end_marker(
        cycle_id="c1", operation="observation", record_id="r1", thread_id="t1",
        started_at=FROZEN - timedelta(seconds=offset_s), completed_at=FROZEN,
        tokens_observed=500, observation_tokens=50, observations="* 🔴 (12:00) x",
        current_task="task", suggested_response="reply",
    )
    assert part.name == "om-observation-end"
    assert part.data["duration_ms"] == expected_ms
    assert part.data["completed_at"] == "2025-06-15T12:00:00+00:00"
    assert part.data["tokens_observed"] == 500
    assert part.data["observation_tokens"] == 50
    assert part.data["observations"] == "* 🔴 (12:00) x"
    assert part.data["current_task"] == "task"
    assert part.data["suggested_response"] == "reply"


def test_end_marker_omits_absent_optional_fields() -> None:
    part = markers.observation_end_marker(
        cycle_id="c1", operation="observation", record_id="r1", thread_id="t1",
        started_at=FROZEN, completed_at=FROZEN, tokens_observed=1, observation_tokens=0,
    )
    for key in ("observations", "current_task", "suggested_response", "extracted_values", "extraction_failures"):
        assert key not in part.data


def test_end_marker_carries_extracted_values_and_failures() -> None:
    part = markers.observation_end_marker(
        cycle_id="c1", operation="observation", record_id="r1", thread_id="t1",
        started_at=FROZEN, completed_at=FROZEN, tokens_observed=1, observation_tokens=1,
        extracted_values={"mood": "calm"}, extraction_failures={"plan": "bad json"},
    )
    assert part.data["extracted_values"] == {"mood": "calm"}
    assert part.data["extraction_failures"] == {"plan": "bad json"}


@pytest.mark.parametrize("operation", ["observation", "reflection"])
def test_failed_marker(operation: markers.OperationType) -> None:
    part = markers.observation_failed_marker(
        cycle_id="c1", operation=operation, record_id="r1", thread_id="t1",
        started_at=FROZEN - timedelta(seconds=5), failed_at=FROZEN, tokens_attempted=900, error="boom",
    )
    assert part.name == "om-observation-failed"
    assert part.data["operation_type"] == operation
    assert part.data["failed_at"] == "2025-06-15T12:00:00+00:00"
    assert part.data["duration_ms"] == 5000
    assert part.data["tokens_attempted"] == 900
    assert part.data["error"] == "boom"
    assert "retrying" not in part.data


def test_failed_marker_retrying_flag() -> None:
    part = markers.observation_failed_marker(
        cycle_id="c1", operation="reflection", record_id="r1", thread_id="t1", started_at=FROZEN,
        failed_at=FROZEN, tokens_attempted=1, error="retrying at level 2", retrying=True,
    )
    assert part.data["retrying"] is True


def test_buffering_markers() -> None:
    start = markers.buffering_start_marker(
        cycle_id="b1", operation="observation", record_id="r", thread_id="t", started_at=FROZEN,
        tokens_to_buffer=700, config=CONFIG,
    )
    assert start.name == "om-buffering-start"
    assert start.data["tokens_to_buffer"] == 700
    end = markers.buffering_end_marker(
        cycle_id="b1", operation="observation", record_id="r", thread_id="t",
        started_at=FROZEN - timedelta(seconds=2), completed_at=FROZEN, tokens_buffered=700,
        buffered_tokens=90, observations="* x",
    )
    assert end.name == "om-buffering-end"
    assert (end.data["duration_ms"], end.data["tokens_buffered"], end.data["buffered_tokens"]) == (2000, 700, 90)
    assert end.data["observations"] == "* x"
    failed = markers.buffering_failed_marker(
        cycle_id="b1", operation="observation", record_id="r", thread_id="t",
        started_at=FROZEN - timedelta(seconds=10), failed_at=FROZEN, tokens_attempted=700, error="x",
    )
    assert failed.name == "om-buffering-failed"
    assert (failed.data["duration_ms"], failed.data["tokens_attempted"]) == (10000, 700)


def test_activation_marker() -> None:
    part = markers.activation_marker(
        cycle_id="b1", operation="observation", record_id="r", thread_id="t", activated_at=FROZEN,
        chunks_activated=1, tokens_activated=5000, observation_tokens=400, messages_activated=12,
        generation=3, config=CONFIG, triggered_by="ttl", extra={"ttl_expired_ms": 300_000},
    )
    assert part.name == "om-activation"
    assert part.data["activated_at"] == "2025-06-15T12:00:00+00:00"
    assert part.data["chunks_activated"] == 1
    assert part.data["tokens_activated"] == 5000
    assert part.data["observation_tokens"] == 400
    assert part.data["messages_activated"] == 12
    assert part.data["generation"] == 3
    assert part.data["triggered_by"] == "ttl"
    assert part.data["ttl_expired_ms"] == 300_000
    assert part.data["config"]["message_tokens"] == 30_000


def test_thread_update_marker() -> None:
    part = markers.thread_update_marker(cycle_id="c", thread_id="t", old_title=None, new_title="Trip to Lisbon", at=FROZEN)
    assert part.data == {
        "cycle_id": "c", "thread_id": "t", "old_title": None, "new_title": "Trip to Lisbon",
        "timestamp": "2025-06-15T12:00:00+00:00",
    }


async def _advance(clock: FakeClock) -> None:
    await clock.sleep(1.5)


@pytest.mark.anyio
async def test_durations_come_from_one_clock() -> None:
    clock = FakeClock(FROZEN)
    started = clock.now()
    await _advance(clock)
    finished = clock.now()
    end = markers.observation_end_marker(
        cycle_id="c", operation="observation", record_id="r", thread_id="t", started_at=started,
        completed_at=finished, tokens_observed=1, observation_tokens=1,
    )
    failed = markers.observation_failed_marker(
        cycle_id="c", operation="reflection", record_id="r", thread_id="t", started_at=started,
        failed_at=finished, tokens_attempted=1, error="e",
    )
    assert end.data["duration_ms"] == failed.data["duration_ms"] == 1500


def _message(role: str, idx: int) -> Message:
    return Message.model_validate({"id": f"m{idx}", "role": role, "parts": [{"type": "text", "text": "x"}]})


def test_marker_target_is_newest_assistant_message_never_user() -> None:
    msgs = [_message("user", 1), _message("assistant", 2), _message("user", 3)]
    target = markers.marker_target(msgs)
    assert target is not None and target.id == "m2"
    assert markers.marker_target([_message("user", 1), _message("user", 2)]) is None


def test_find_markers_filters_by_kind() -> None:
    start = markers.observation_start_marker(
        cycle_id="c", operation="observation", record_id="r", thread_id="t", started_at=FROZEN,
        tokens_to_observe=1, config=CONFIG,
    )
    msg = Message(role="assistant", parts=(ToolCallPart(tool_call_id="1", tool_name="x"), start))
    other = Message(role="tool", parts=(ToolResultPart(tool_call_id="1", tool_name="x", result=1),))
    assert markers.find_markers([msg, other]) == [start]
    assert markers.find_markers([msg], "om-observation-end") == []
