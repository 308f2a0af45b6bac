"""Issue 15: the offline observer and reflector on ordinary assistant sessions (agent mode)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.offline.reflector import consolidate_observations
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.types import Message, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

T = datetime(2025, 6, 16, 10, 0, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return T + timedelta(minutes=minutes)


async def _observe(*messages: Message, previous: str = "") -> list[str]:
    result = await OfflineObserver().observe(ObservationRequest(messages=messages, previous_observations=previous))
    return [line.strip() for line in result.observations.splitlines() if line.strip().startswith("*")]


def _exchange(user: str, answer: str, minute: int) -> list[Message]:
    return [Message.user(user, created_at=_at(minute)), Message.assistant(answer, created_at=_at(minute))]


@pytest.mark.parametrize(
    "restated",
    [
        "Use +44 7700 9555 111 as my phone number from now on.",
        "New phone number: +44 7700 9555 111.",
        "Going forward, my phone number is +44 7700 9555 111.",
        "My phone number changed, it's now +44 7700 9555 111.",
    ],
)
async def test_a_new_value_supersedes_the_old_with_or_without_a_change_word(restated: str) -> None:
    lines = await _observe(*_exchange("My phone number is +44 7700 9123 456.", "Got it.", 0),
                           *_exchange(restated, "Noted.", 5))  # fmt: skip
    joined = "\n".join(lines)
    assert "+44 7700 9555 111" in joined and "(changing from +44 7700 9123 456)" in joined
    # the older line of the same batch is gone: only the change remains
    assert not [line for line in lines if "9123 456" in line and "changing from" not in line]


async def test_across_batches_the_reflector_drops_the_superseded_value() -> None:
    previous = "Date: Jun 10, 2025\n* 🔴 (09:00) User stated the budget for the trip is €1,350."
    new = await _observe(*_exchange("Use €2,450 as the budget for the trip from now on.", "Noted.", 0),
                         previous=previous)  # fmt: skip
    assert any("€2,450" in line and "(changing from €1,350)" in line for line in new)
    merged = previous + "\n\nDate: Jun 16, 2025\n" + "\n".join(new)
    assert "€1,350." not in consolidate_observations(merged)
    reflected = await OfflineReflector().reflect(ReflectionRequest(observations=merged, target_tokens=10_000))
    assert "is €1,350" not in reflected.observations and "€2,450" in reflected.observations


async def test_a_decision_and_its_switch_are_kept_with_what_they_are_about() -> None:
    messages = [
        *_exchange("Which hotel would you suggest?", "Two good options: Brako Hotel and Velmi Hotel.", 0),
        *_exchange("Let's go with Brako Hotel.", "Great choice, noted.", 1),
        *_exchange("Actually, switch to Quor Hotel instead. It's a better fit for the hotel.", "Okay.", 9),
    ]
    lines = await _observe(*messages)
    assert "🔴 (10:09) User chose Quor Hotel for the hotel (changing from Brako Hotel)." in "\n".join(lines)
    assert not [line for line in lines if "chose Brako Hotel" in line]


async def test_a_decision_asked_in_the_previous_batch_keeps_its_topic() -> None:
    previous = "Date: Jun 16, 2025\n* 🟡 (09:58) User asked which tile supplier would you suggest."
    lines = await _observe(*_exchange("Okay, Zanri Tiles it is.", "Great choice.", 0), previous=previous)
    assert any("User chose Zanri Tiles for the tile supplier" in line for line in lines)


async def test_a_finished_task_is_marked_done_and_its_request_no_longer_open() -> None:
    messages = [
        *_exchange("Can you help me put together the Zan packing list?", "Here is a first outline for it.", 0),
        *_exchange("The Zan packing list is done, I sent it off.", "Great.", 9),
    ]
    lines = await _observe(*messages)
    assert any(line.startswith("* ✅") and "User finished the Zan packing list" in line for line in lines)
    assert not [line for line in lines if "asked" in line and "Zan" in line]
    log = ("Date: Jun 10, 2025\n* 🟡 (09:00) Topics: help them put together the Zan packing…; how to pack shoes.\n"
           "\nDate: Jun 16, 2025\n* ✅ (10:09) User finished the Zan packing list.")  # fmt: skip
    consolidated = consolidate_observations(log)
    assert "Topics: how to pack shoes." in consolidated and "Zan packing…" not in consolidated


@pytest.mark.parametrize("reply", ["Done, it went through. Everything is in the result above.",
                                   "Done: the booking is set up; the confirmation code is C-ZQMMGK."])  # fmt: skip
async def test_tool_result_codes_get_a_line_of_their_own(reply: str) -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="book_hotel", args={"item": "Mirel hotel"})
    result = ToolResultPart(tool_call_id="c1", tool_name="book_hotel",
                            result={"status": "ok", "confirmation_code": "C-ZQMMGK", "total": "€412.80",
                                    "created": "2025-06-16", "notes": "Keep this for your records."})  # fmt: skip
    lines = await _observe(
        Message.user("Please go ahead with the Mirel hotel booking.", created_at=_at(0)),
        Message(role="assistant", parts=(call,), created_at=_at(0)),
        Message(role="tool", parts=(result,), created_at=_at(0)),
        Message.assistant(reply, created_at=_at(1)),
    )
    (line,) = [line for line in lines if line.startswith("* ✅") and "book_hotel" in line]
    assert "confirmation_code C-ZQMMGK" in line and "total €412.80" in line and "2025-06-16" not in line


async def test_dates_are_read_in_the_message_s_own_time_zone() -> None:
    # 23:30 in New York is 04:30 UTC the next day: "tomorrow" is counted from the New York day
    new_york = timezone(timedelta(hours=-5))
    said = datetime(2025, 6, 16, 23, 30, tzinfo=new_york)
    lines = await _observe(Message.user("I have the dentist appointment with Dr. Mirel tomorrow.", created_at=said))
    assert any("(meaning Jun 17, 2025)" in line for line in lines), lines


async def test_recurring_times_never_become_one_date() -> None:
    lines = await _observe(
        Message.user("I go to swimming with Velo from 7am to 3pm Saturday to Wednesday.", created_at=_at(0)),
        Message.user("I have piano lessons with Brel on Sundays.", created_at=_at(1)),
    )
    assert lines and not [line for line in lines if "meaning" in line or "estimated" in line]


def test_an_answer_cut_for_length_keeps_its_figure() -> None:
    from obsmem.om.offline.rules import summarise

    answer = ("For the Thursday flight from Berlin to Lisbon, the most convenient option that still leaves "
              "you time for the airport transfer and a relaxed lunch is Lufthansa via Frankfurt, which "
              "costs €389 return per person.")  # fmt: skip
    summary = summarise([answer], 150, frozenset())
    assert "€389" in summary and len(summary) <= 150


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("My email is new@y.example now.", "(changing from old@x.example)"),
        ("We went with the Velmi Hotel after all.", "User chose Velmi Hotel for the hotel (changing from Brako Hotel)"),
        ("I'm done with the Zan report.", "User finished the Zan report"),
    ],
)
async def test_other_wordings_of_changes_decisions_and_completions(said: str, expected: str) -> None:
    previous = ("Date: Jun 10, 2025\n* 🔴 (09:00) User stated their email address is old@x.example.\n"
                "* 🔴 (09:02) User chose Brako Hotel for the hotel.")  # fmt: skip
    lines = await _observe(Message.user(said, created_at=_at(0)), previous=previous)
    assert expected in "\n".join(lines), lines


def test_revise_active_drops_only_stale_lines_and_keeps_the_rest_byte_for_byte() -> None:
    active = (
        "Date: Jun 10, 2025\n"
        "* 🔴 (09:00) User stated their phone number is +44 7700 9123 456.\n"
        "* 🟡 (09:05) Topics: help them put together the Zan packing…; how to pack shoes.\n"
        "* 🟡 (09:07) User asked the assistant to draft the Zan packing list.\n"
        "  * -> outline given\n"
        "\n--- message boundary (2025-06-16T10:00:00+00:00) ---\n\n"
        "Date: Jun 16, 2025\n"
        "* 🔴 (10:00) User stated their phone number is now +44 7700 9555 111 (changing from +44 7700 9123 456).\n"
        "* ✅ (10:09) User finished the Zan packing list.\n"
    )
    revised = OfflineObserver().revise_active(active)
    assert "9123 456." not in revised  # the old value's own line is gone …
    assert "(changing from +44 7700 9123 456)" in revised  # … the change that names it stays
    assert "* 🟡 (09:05) Topics: how to pack shoes." in revised
    assert "draft the Zan" not in revised and "outline given" not in revised
    assert "--- message boundary (2025-06-16T10:00:00+00:00) ---" in revised
    assert revised.endswith("* ✅ (10:09) User finished the Zan packing list.\n")
    assert OfflineObserver().revise_active(revised) == revised  # nothing more to drop
    unchanged = "Date: Jun 10, 2025\n* 🔴 (09:00) User stated they live in Porto.\n"
    assert OfflineObserver().revise_active(unchanged) is unchanged


async def test_an_older_number_said_in_passing_is_no_longer_shown_as_current() -> None:
    log = ("Date: Jun 10, 2025\n* 🔴 (09:00) User stated they put their number +49 151 5550 7720 in the "
           "signature of every email.\n\nDate: Jun 16, 2025\n"
           "* 🔴 (10:00) User stated their number is now +49 176 5550 3381.")  # fmt: skip
    consolidated = consolidate_observations(log)
    assert "+49 151 5550 7720" not in consolidated and "(a former phone)" in consolidated
    assert "signature of every email" in consolidated and "+49 176 5550 3381" in consolidated
