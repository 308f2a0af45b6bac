"""Context assembly: order, reminder, annotation, gap markers, truncated previous observations,
the application's instructions, obsmem's own messages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig, Thread
from obsmem.om.context import (
    CONTINUATION_ID,
    build_context,
    drop_obsmem_messages,
    is_obsmem_message,
    load_instructions,
    remember_instructions,
)
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage.contract import ObservationRecord, ThreadState
from obsmem.storage.memory import MemoryStore

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
    reminder = next(m for m in window.messages if m.id.startswith(CONTINUATION_ID))
    assert reminder.id == "om-continuation:t1"  # per thread (issue 12, item 5)
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


# --- the application's instructions (issue 12, item 2) -------------------------------------------

PROMPT = Message.system("You are Pia, a travel assistant.", id="app-prompt")


def test_the_applications_instructions_lead_the_context_and_the_prefix() -> None:
    """Order: instructions, preamble and chunks, volatile sections, reminder, raw tail; the
    prefix (instructions included) does not change when only the volatile parts do."""
    conv = Conversation()
    record = record_with(OBS, current_task="Book the hotel", suggested_response="Offer options")
    window = build_context(record, [conv.user("hi")], thread_id="t1", now=START, instructions=[PROMPT])
    assert [m.id for m in window.instructions] == ["app-prompt"]
    keys = [m.metadata.get("obsmem") for m in window.messages]
    assert keys == [None, "preamble", "observations-0", "current-task", "suggested-response", "continuation", None]
    assert window.messages[0].text == PROMPT.text
    assert window.prefix_text.startswith(PROMPT.text + "\n\n" + "Your memory of the earlier conversation")
    other = build_context(
        record_with(OBS, current_task="Something else"), [conv.user("hi"), conv.assistant("yo")],
        thread_id="t1", now=START, instructions=[PROMPT], working_memory="Name: Kari",
    )
    assert other.prefix_text == window.prefix_text


def test_instructions_without_observations_are_the_whole_prefix() -> None:
    conv = Conversation()
    window = build_context(None, [conv.user("hi")], thread_id="t1", now=START, instructions=[PROMPT])
    assert [m.role for m in window.messages] == ["system", "user"]
    assert window.prefix_text == PROMPT.text and not window.has_observations


def test_without_recorded_instructions_the_last_run_of_system_messages_leads() -> None:
    """A thread whose instructions were never recorded (older data): the last contiguous run of
    the application's system messages among the unobserved ones stands in; system messages never
    appear in the raw tail."""
    conv = Conversation()
    old, new_a, new_b = Message.system("old", id="s1"), Message.system("new a", id="s2"), Message.system("new b", id="s3")
    unobserved = [old, conv.user("hi"), conv.assistant("yo"), new_a, new_b, conv.user("again")]
    window = build_context(None, unobserved, thread_id="t1", now=START)
    assert [m.id for m in window.messages] == ["s2", "s3", "u1", "a2", "u3"]
    assert window.raw_messages == [m for m in unobserved if m.role != "system"]
    recorded = build_context(None, unobserved, thread_id="t1", now=START, instructions=[])
    assert [m.role for m in recorded.messages] == ["user", "assistant", "user"]


# --- obsmem's own messages (issue 12, item 5) ---------------------------------------------------


def test_obsmem_messages_carry_per_thread_ids_and_a_marker() -> None:
    conv = Conversation()
    ids: list[set[str]] = []
    for thread_id in ("t1", "t2"):
        record = record_with(OBS, current_task="Book the hotel").model_copy(
            update={"thread_id": thread_id, "lineage": f"thread:{thread_id}",
                    "threads": {thread_id: ThreadState(current_task="Book the hotel")}}
        )
        window = build_context(record, [conv.user("hi")], thread_id=thread_id, now=START, working_memory="x")
        own = [m for m in window.messages if m.metadata.get("obsmem")]
        assert len(own) == 5 and all(is_obsmem_message(m) and m.id.endswith(f":{thread_id}") for m in own)
        ids.append({m.id for m in own})
    assert ids[0].isdisjoint(ids[1])


def test_a_context_saved_back_never_shows_obsmem_messages_twice() -> None:
    """Unobserved messages that are obsmem's own (an application stored what it sent, before
    this was refused at the door) are not conversation: not in the raw tail, not counted by the
    hints check, and the context is the same as without them."""
    conv = Conversation()
    record = record_with(OBS, current_task="Book the hotel; waiting for the assistant to do it")
    first = build_context(record, [conv.user("hi")], thread_id="t1", now=START, temporal_markers=True)
    later = conv.user("and now?")
    conv.at += timedelta(hours=3)
    unobserved = [*first.messages, later]
    again = build_context(record, unobserved, thread_id="t1", now=START, temporal_markers=True)
    clean = build_context(record, [first.raw_messages[0], later], thread_id="t1", now=START, temporal_markers=True)
    assert again.messages == clean.messages
    assert [m.metadata.get("obsmem") for m in again.messages].count("preamble") == 1
    assert any(m.metadata.get("obsmem") == "current-task" for m in again.messages)


async def test_instructions_are_recorded_on_the_thread_compare_and_set() -> None:
    """The store-backed half: what one call saved is recorded once; an older call never
    overwrites newer instructions; loading returns the newest version of each id."""
    store = MemoryStore()
    thread = await store.create_thread(Thread(id="t1", resource_id="u1"))
    first = await store.save_messages("t1", [PROMPT, Message.user("hi", id="u1")])
    thread = await remember_instructions(store, thread, first)
    assert thread.metadata["obsmem"]["instructions"]["ids"] == ["app-prompt"]
    unchanged = await remember_instructions(store, thread, first)
    assert unchanged.version == thread.version  # the same instructions: no write
    newer = await store.save_messages("t1", [Message.system("New rules.", id="rules")])
    thread = await remember_instructions(store, thread, newer)
    stale = await remember_instructions(store, thread, first)  # an older call, arriving late
    assert stale.metadata["obsmem"]["instructions"]["ids"] == ["rules"]
    await store.save_messages("t1", [Message.system("New rules, edited.", id="rules")])
    loaded = await load_instructions(store, await store.get_thread("t1") or thread)
    assert loaded is not None and [m.text for m in loaded] == ["New rules, edited."]
    fresh = await store.create_thread(Thread(id="t2", resource_id="u1"))
    assert await load_instructions(store, fresh) is None
    assert [m.metadata.get("obsmem") for m in drop_obsmem_messages([PROMPT])] == [None]
