"""Context assembly: order, reminder, annotation, gap markers, truncated previous observations."""

from __future__ import annotations

from datetime import timedelta

import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.om.context import CONTINUATION_ID, build_context
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage.contract import ObservationRecord, ThreadState

from .helpers import START, Conversation, fake_clock, replay, small_config

pytestmark = pytest.mark.anyio


def record_with(text: str, **state: object) -> ObservationRecord:
    return ObservationRecord(
        id="r", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1",
        active_observations=text, threads={"t1": ThreadState(cursor=0, **state)},  # type: ignore[arg-type]
    )


OBS = "Date: Jun 14, 2025\n* 🔴 (09:00) User plans to fly to Lisbon on Friday (meaning Jun 13, 2025).\n* 🟡 (09:05) Assistant ran search -> ok."


def test_order_is_preamble_chunks_volatile_then_reminder_then_raw() -> None:
    conv = Conversation()
    text = OBS + "\n\n--- message boundary (2025-06-14T09:06:00+00:00) ---\n\nDate: Jun 15, 2025\n* 🔴 (08:00) User stated x."
    record = record_with(text, current_task="Book the hotel", suggested_response="Offer options")
    window = build_context(record, [conv.user("hi")], thread_id="t1", now=START)
    keys = [m.metadata.get("obsmem") for m in window.messages]
    assert keys == ["preamble", "observations-0", "observations-1", "current-task", "suggested-response",
                    "continuation", None]
    assert window.messages[1].text.startswith("<observations>")
    assert window.messages[2].text.endswith("</observations>")
    reminder = next(m for m in window.messages if m.id == CONTINUATION_ID)
    assert reminder.role == "user" and reminder.created_at.year == 1970
    assert "<system-reminder>" in reminder.text


def test_observations_are_annotated_and_optimised_for_the_actor() -> None:
    window = build_context(record_with(OBS), [], thread_id="t1", now=START)
    body = window.messages[1].text
    assert "Date: Jun 14, 2025 (yesterday)" in body
    assert "(meaning Jun 13, 2025 - 2 days ago, likely already happened)" in body
    assert "🟡" not in body and "🔴" in body
    assert "->" not in body


def test_no_observations_means_no_system_messages_and_no_reminder() -> None:
    conv = Conversation()
    window = build_context(record_with(""), [conv.user("hi")], thread_id="t1", now=START)
    assert [m.role for m in window.messages] == ["user"]


def test_temporal_gap_markers_precede_a_late_user_message() -> None:
    conv = Conversation()
    first = conv.user("see you later")
    conv.at += timedelta(hours=2, minutes=4)
    second = conv.user("back again")
    window = build_context(None, [first, second], thread_id="t1", now=START, temporal_markers=True)
    texts = [m.text for m in window.messages]
    assert len(texts) == 3
    assert "2 hours 5 minutes later" in texts[1] and texts[1].startswith("<system-reminder>")
    plain = build_context(None, [first, second], thread_id="t1", now=START)
    assert len(plain.messages) == 2


async def test_observer_sees_previous_observations_truncated_to_budget() -> None:
    requests: list[ObservationRequest] = []

    class RecordingObserver:
        name = "recording"

        async def observe(self, request: ObservationRequest) -> ObservationResult:
            requests.append(request)
            lines = "\n".join(f"* 🟡 (09:{i:02d}) Observation number {i} with some words." for i in range(40))
            return ObservationResult(observations=f"Date: Jun 15, 2025\n{lines}")

    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=False, previous_observer_tokens=200),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    memory = Memory("memory://", config=config, observer=RecordingObserver(), clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 30)
    assert len(requests) >= 2
    later = requests[-1]
    assert later.previous_truncated
    assert memory.counter.count_text(later.previous_observations) <= 200
    assert "truncated here" in later.previous_observations


async def test_previous_observations_budget_false_disables_truncation() -> None:
    seen: list[ObservationRequest] = []

    class RecordingObserver:
        name = "recording"

        async def observe(self, request: ObservationRequest) -> ObservationResult:
            seen.append(request)
            return ObservationResult(observations="Date: Jun 15, 2025\n" + "* 🟡 (09:00) a fairly long line of text\n" * 30)

    memory = Memory("memory://", config=small_config(previous_observer_tokens=False), observer=RecordingObserver(),
                    clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 30)
    assert len(seen) >= 2 and not seen[-1].previous_truncated
