"""The offline observer: one table per rule, plus determinism, hints, hooks and compression."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem.om.extractors import Extractor
from obsmem.om.text.format import PRIORITIES, parse_observations
from obsmem.om.offline import OfflineObserver
from obsmem.om.offline.rules import estimate_tokens, names
from obsmem.om.protocols import ObservationRequest, ObservationResult, Observer
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

pytestmark = pytest.mark.anyio

WEDNESDAY = datetime(2025, 6, 18, 14, 30, tzinfo=UTC)
SUNDAY = datetime(2025, 6, 15, 14, 30, tzinfo=UTC)


def user(text: str, minute: float = 0, start: datetime = WEDNESDAY) -> Message:
    return Message.user(text, created_at=start + timedelta(minutes=minute))


def assistant(text: str, minute: float = 0, start: datetime = WEDNESDAY) -> Message:
    return Message.assistant(text, created_at=start + timedelta(minutes=minute))


def tool_call(call_id: str, name: str, args: dict[str, Any], minute: float = 0) -> Message:
    part = ToolCallPart(tool_call_id=call_id, tool_name=name, args=args)
    return Message(role="assistant", parts=(part,), created_at=WEDNESDAY + timedelta(minutes=minute))


def tool_result(call_id: str, name: str, result: Any, minute: float = 0, *, error: bool = False) -> Message:
    part = ToolResultPart(tool_call_id=call_id, tool_name=name, result=result, is_error=error)
    return Message(role="tool", parts=(part,), created_at=WEDNESDAY + timedelta(minutes=minute))


async def observe(*messages: Message, **kwargs: Any) -> ObservationResult:
    return await OfflineObserver().observe(ObservationRequest(messages=messages, **kwargs))


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("*")]


def line_with(text: str, needle: str) -> str:
    found = [line for line in lines_of(text) if needle in line]
    assert found, f"no line contains {needle!r} in:\n{text}"
    return found[0]


# --------------------------------------------------------------------------------------------
# Format
# --------------------------------------------------------------------------------------------


async def test_output_format_header_time_priority() -> None:
    result = await observe(user("I live in Lisbon."))
    assert result.observations == "Date: Jun 18, 2025\n* 🔴 (14:30) User stated they live in Lisbon."


async def test_every_line_parses_with_priority_and_time() -> None:
    result = await observe(*realistic_conversation())
    groups = parse_observations(result.observations)
    assert groups and all(g.day is not None for g in groups)
    for group in groups:
        for line in group.lines:
            if line.indent == 0:
                assert line.priority in PRIORITIES and line.time is not None, line


async def test_times_and_dates_use_the_request_timezone() -> None:
    late = datetime(2025, 6, 18, 23, 30, tzinfo=UTC)  # 01:30 on Jun 19 in Berlin
    result = await observe(user("I fly to Rome tomorrow.", start=late), timezone=ZoneInfo("Europe/Berlin"))
    assert result.observations.startswith("Date: Jun 19, 2025\n* 🔴 (01:30)")
    assert "(meaning Jun 20, 2025)" in result.observations


async def test_nothing_worth_keeping_gives_empty_text() -> None:
    result = await observe(user("hi!"), assistant("Hello! How can I help you today?"), user("ok thanks lol"))
    assert result.observations == ""


async def test_protocol_and_name() -> None:
    assert isinstance(OfflineObserver(), Observer)
    assert OfflineObserver.name == "offline"


# --------------------------------------------------------------------------------------------
# First-person facts and preferences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        (
            "I live in Lisbon and I work at Siemens.",
            "User stated they live in Lisbon and they work at Siemens.",
        ),
        ("I'm allergic to peanuts.", "User stated they are allergic to peanuts."),
        ("I am a nurse at St. Mary's.", "User stated they are a nurse at St. Mary's."),
        ("My daughter Emma is 7 years old.", "User stated their daughter Emma is 7 years old."),
        ("I prefer aisle seats on long flights.", "User stated they prefer aisle seats on long flights."),
        (
            "I hate cilantro, it tastes like soap to me.",
            "User stated they hate cilantro, it tastes like soap to them.",
        ),
        ("I have two cats named Miso and Tofu.", "User stated they have two cats named Miso and Tofu."),
        ("I love hiking in the Alps.", "User stated they love hiking in the Alps."),
        ("My name is Nadia Kessler.", "User stated their name is Nadia Kessler."),
        ("We own a 2019 Skoda Octavia.", "User stated they own a 2019 Skoda Octavia."),
    ],
)
async def test_first_person_facts_are_high_priority_third_person(said: str, expected: str) -> None:
    result = await observe(user(said))
    assert lines_of(result.observations) == [f"* 🔴 (14:30) {expected}"]


async def test_names_numbers_and_places_are_kept_verbatim() -> None:
    result = await observe(
        user("My landlord Mr. Weber wants 1,250 EUR by June 30 for the flat on Oranienstraße 12.")
    )
    for kept in ("Mr. Weber", "1,250 EUR", "June 30", "Oranienstraße 12"):
        assert kept in result.observations


# --------------------------------------------------------------------------------------------
# Changes of state
# --------------------------------------------------------------------------------------------


async def test_change_uses_previous_observations() -> None:
    previous = "Date: Jun 1, 2025\n* 🔴 (09:00) User stated they live in Munich."
    result = await observe(user("I moved to Berlin."), previous_observations=previous)
    assert lines_of(result.observations) == [
        "* 🔴 (14:30) User stated they moved to Berlin (changing from Munich)."
    ]


async def test_change_within_the_same_batch() -> None:
    result = await observe(
        user("My email is nadia@old.example."), user("Update: my email is now nadia@new.example.", 5)
    )
    line = line_with(result.observations, "nadia@new.example")
    assert line.startswith("* 🔴") and line.endswith("(changing from nadia@old.example).")


@pytest.mark.parametrize(
    ("previous", "said", "expected"),
    [
        ("User stated their editor is Vim.", "I switched my editor to Helix.", "(changing from Vim)"),
        (
            "User stated they use Gmail for email.",
            "I switched to Fastmail for email.",
            "(changing from Gmail)",
        ),
        ("User stated they work at Siemens.", "I started at Stripe last week.", None),
        (
            "User stated their favourite colour is blue.",
            "My favorite color is green now.",
            "(changing from blue)",
        ),
        ("", "I moved from Hamburg to Cologne.", "(changing from Hamburg)"),
        ("User stated they work at Siemens.", "I no longer work at Siemens.", None),
    ],
)
async def test_change_of_state_table(previous: str, said: str, expected: str | None) -> None:
    prev = f"Date: Jun 1, 2025\n* 🔴 (09:00) {previous}" if previous else ""
    result = await observe(user(said), previous_observations=prev)
    line = lines_of(result.observations)[0]
    assert line.startswith("* 🔴")
    if expected:
        assert expected in line
    else:
        assert "changing from" not in line or "Siemens" in line


async def test_no_change_note_without_a_previous_value() -> None:
    result = await observe(user("I moved to Berlin."))
    assert "changing from" not in result.observations


async def test_a_plan_does_not_overwrite_the_current_value() -> None:
    previous = "Date: Jun 1, 2025\n* 🔴 (09:00) User stated they live in Munich."
    result = await observe(
        user("I plan to move to Lisbon next year."),
        user("Actually I moved to Berlin.", 3),
        previous_observations=previous,
    )
    assert (
        "User plans to move to Lisbon next year (changing from Munich) (meaning 2026)." in result.observations
    )
    assert "User stated they moved to Berlin (changing from Munich)." in result.observations


# --------------------------------------------------------------------------------------------
# Plans and resolved dates ("next Friday" = the Friday of next week; see offline_rules)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "start", "note"),
    [
        ("I'm going to visit Lisbon next Friday.", WEDNESDAY, "(meaning Jun 27, 2025)"),
        ("I'm going to visit Lisbon next Friday.", SUNDAY, "(meaning Jun 20, 2025)"),
        ("I'll see the dentist on Friday.", WEDNESDAY, "(meaning Jun 20, 2025)"),
        ("I'll see the dentist this Friday.", WEDNESDAY, "(meaning Jun 20, 2025)"),
        ("I fly to Oslo tomorrow.", WEDNESDAY, "(meaning Jun 19, 2025)"),
        ("Yesterday I ran 10 km in the park.", WEDNESDAY, "(meaning Jun 17, 2025)"),
        ("I got my bike stolen 3 days ago.", WEDNESDAY, "(meaning Jun 15, 2025)"),
        ("I started a new diet 2 weeks ago.", WEDNESDAY, "(estimated Jun 4, 2025)"),
        ("I want to finish the report next week.", WEDNESDAY, "(meaning week of Jun 23, 2025)"),
        ("I need to buy a tent this weekend.", WEDNESDAY, "(meaning weekend of Jun 21, 2025)"),
        ("I plan to start guitar lessons next month.", WEDNESDAY, "(meaning Jul 2025)"),
        ("I will travel to Japan in March.", WEDNESDAY, "(meaning Mar 2026)"),
        ("I was in Japan in March.", WEDNESDAY, "(meaning Mar 2025)"),
        ("I visited my parents last Friday.", WEDNESDAY, "(meaning Jun 13, 2025)"),
        ("I'm flying to Porto on July 4.", WEDNESDAY, "(meaning Jul 4, 2025)"),
        ("I'll see you in 10 days, I'm going to Crete.", WEDNESDAY, "(meaning Jun 28, 2025)"),
    ],
)
async def test_dates_resolve_against_the_message_date(said: str, start: datetime, note: str) -> None:
    result = await observe(user(said, start=start))
    line = lines_of(result.observations)[0]
    assert line.startswith("* 🔴") and line.endswith(f"{note}."), line


@pytest.mark.parametrize(
    "said",
    [
        "I recently started running.",
        "I'll get a new laptop soon.",
        "My birthday is June 20.",
        "I work on Fridays from home.",
        "Today I feel great about the move to Berlin.",
    ],
)
async def test_vague_or_recurring_times_get_no_date(said: str) -> None:
    result = await observe(user(said))
    assert "(meaning" not in result.observations and "(estimated" not in result.observations


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("I'm going to visit Lisbon next Friday.", "User plans to visit Lisbon next Friday"),
        ("I want to learn Portuguese.", "User wants to learn Portuguese"),
        ("I need to renew my passport in August.", "User needs to renew their passport in August"),
        (
            "I'm looking forward to the concert on Saturday.",
            "User is looking forward to the concert on Saturday",
        ),
        (
            "We're going to rent a car in Sintra tomorrow.",
            "User (with others) plans to rent a car in Sintra tomorrow",
        ),
    ],
)
async def test_intent_phrases_become_plans(said: str, expected: str) -> None:
    result = await observe(user(said))
    assert lines_of(result.observations)[0].startswith(f"* 🔴 (14:30) {expected}")


async def test_two_dated_events_in_one_sentence_become_two_lines() -> None:
    result = await observe(user("I'm flying to Rome on Friday and visiting Milan next week."))
    assert [line.rsplit("(", 1)[1] for line in lines_of(result.observations)] == [
        "meaning Jun 20, 2025).",
        "meaning week of Jun 23, 2025).",
    ]


async def test_vague_intent_is_dropped() -> None:
    assert (await observe(user("I'll think about it."))).observations == ""


# --------------------------------------------------------------------------------------------
# Priorities: 🔴 only for durable facts, changes and dated plans; chatter is 🟢 or nothing
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "said",
    [
        "Sorry, got pulled into a call for 20 minutes.",
        "Heading to the office now, the U-Bahn waits for no one.",
        "Let's talk Lisbon.",
        "Honestly I would have noticed on the day at 9:30.",
        "Going to sleep too, big day tomorrow.",
        "Ida is asleep on Tomás and I'm the only one awake.",
        "The technician rang the doorbell at 7:50.",
        "Sepp just said the truck is full.",
        "Maybe I'll try cutting down after the move.",
        "I'll make a ticket.",
        "Priya asked me on Friday about zoneinfo and I gave a bad answer.",
    ],
)
async def test_chatter_is_never_high_priority(said: str) -> None:
    result = await observe(user(said))
    assert "🔴" not in result.observations, result.observations
    assert all(not line.startswith("* 🟡") for line in lines_of(result.observations)), result.observations


@pytest.mark.parametrize(
    "said", ["Sorry, got pulled into a call.", "Anyway.", "I'm starving.", "Writing it down now."]
)
async def test_chatter_without_names_or_numbers_is_dropped(said: str) -> None:
    assert (await observe(user(said))).observations == ""


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("Tomás is an architect, by the way, he got an offer.", "Tomás is an architect, he got"),
        ("The movers are Brandt Umzüge, booked for both days.", "the movers are Brandt Umzüge"),
        ("Ida will go to Kita Sonnenhof, a ten-minute walk from the flat.", "Ida will go to Kita Sonnenhof"),
        ("Our Anmeldung appointment is on March 14th at 9:40.", "appointment is on March 14th at 9:40"),
        ("I always want an aisle seat.", "they always want an aisle seat"),
        ("So my number is now +49 176 5550 3381.", "their number is now +49 176 5550 3381"),
        ("It's a Python service on FastAPI, with PostgreSQL for storage.", "on FastAPI, with PostgreSQL"),
        ("I take Portuguese lessons online on Tuesday evenings.", "on Tuesday evenings"),
        ("Sichuan is my favourite cuisine.", "Sichuan is their favourite cuisine"),
        ("Budget for the whole trip is €2,400, flights included.", "€2,400"),
        ("Decision: we switched to Dramatiq for the background jobs.", "they switched to Dramatiq"),
        ("Jonas, my manager, hates big-bang plans.", "Jonas, their manager, hates big-bang plans"),
        ("The dinner is a surprise for Graça, only her husband knows.", "a surprise for Graça"),
        ("The trial day starts at 10:30 on Friday.", "starts at 10:30 on Friday"),
        ("They let me keep my ThinkPad X1 Carbon.", "their ThinkPad X1 Carbon"),
    ],
)
async def test_durable_facts_and_dated_plans_are_high_priority(said: str, kept: str) -> None:
    result = await observe(user(said))
    line = line_with(result.observations, kept)
    assert line.startswith("* 🔴"), line


async def test_a_quick_intro_lead_in_is_dropped() -> None:
    result = await observe(user("Quick intro since this is a fresh setup: I'm Nadia Kessler."))
    assert lines_of(result.observations) == ["* 🔴 (14:30) User stated they are Nadia Kessler."]


@pytest.mark.parametrize(
    ("said", "priority"),
    [
        ("Meter readings before the handover: electricity 48213, water 1102.", "🟡"),  # figures
        ("15:02 it is, booked with seats at the end of coach 12.", "🟡"),  # a choice from options
        ("I'll call Chengdu Kitchen once we're there.", "🟡"),  # an undated plan naming something
        ("Kiki went for her first walk in Volkspark today with Tomás.", "🟢"),  # narration, new names
    ],
)
async def test_details_that_are_not_durable_get_lower_priorities(said: str, priority: str) -> None:
    (line,) = lines_of((await observe(user(said))).observations)
    assert line.startswith(f"* {priority}"), line


async def test_narration_repeating_known_names_is_dropped() -> None:
    previous = "Date: Jun 1, 2025\n* 🔴 (09:00) User stated their dog Kiki loves Volkspark."
    result = await observe(user("Kiki went to Volkspark again."), previous_observations=previous)
    assert result.observations == ""


async def test_tool_runs_are_folded_into_the_answer_that_reports_them() -> None:
    result = await observe(
        user("What's the weather in Oslo today?"),
        tool_call("c1", "get_weather", {"city": "Oslo"}, 0.1),
        tool_result("c1", "get_weather", {"temp": "12°C", "conditions": "rain"}, 0.2),
        tool_call("c2", "send_alert", {"to": "ops"}, 0.3),
        tool_result("c2", "send_alert", "mailbox full", 0.4, error=True),
        assistant("It's 12°C and raining in Oslo right now.", 1),
    )
    assert lines_of(result.observations) == [
        "* 🟡 (14:30) User asked what's the weather in Oslo today; "
        "Assistant answered: It's 12°C and raining in Oslo right now.",
        "* 🟡 (14:30) Assistant ran send_alert(to=ops) -> error: mailbox full.",  # failures stay
    ]


async def test_tool_runs_of_a_turn_split_across_cycles_fold_into_the_reply() -> None:
    result = await observe(  # the question was observed in the previous cycle
        tool_call("c1", "search_flights", {"to": "LIS"}),
        tool_result("c1", "search_flights", {"cheapest": "TP 541 at 07:10, €612"}),
        assistant("The cheapest is **TP 541** at 07:10 for €612, direct to Lisbon with TAP.", 1),
    )
    assert "Assistant ran" not in result.observations and "TP 541" in result.observations


@pytest.mark.parametrize(
    ("said", "start", "notes"),
    [
        ("The outbound flight is now March 21, Friday morning.", SUNDAY, []),  # the date says it
        ("We'll go out on the Saturday evening, June 28, for dinner.", SUNDAY, ["(meaning Jun 28, 2025)"]),
        ("My title is Staff Engineer, effective June 1st, and I will lead the team.", SUNDAY,
         ["(meaning Jun 1, 2025)"]),  # "effective" is already in force, not next year
    ],
)  # fmt: skip
async def test_explicit_dates_win_over_weekdays(said: str, start: datetime, notes: list[str]) -> None:
    result = await observe(user(said, start=start))
    assert re.findall(r"\((?:meaning|estimated)[^()]*\)", result.observations) == notes


def test_a_pronoun_after_a_capitalised_word_is_not_a_name() -> None:
    assert names("Maybe I will try it. Then I left, said Priya.") == ["Priya"]


# --------------------------------------------------------------------------------------------
# Questions and answers
# --------------------------------------------------------------------------------------------


async def test_question_and_answer_become_one_line() -> None:
    result = await observe(
        user("How do I renew my passport?"),
        assistant(
            "Great question! In Germany you renew a passport at your local Bürgeramt. You need to book an "
            "appointment online, bring your old passport and a biometric photo, and pay a fee of 70 EUR. "
            "Processing usually takes 3 to 4 weeks. I hope this helps!",
            1,
        ),
    )
    (line,) = lines_of(result.observations)
    assert line.startswith(
        "* 🟡 (14:30) User asked how to renew their passport; Assistant answered: In Germany"
    )
    for kept in ("Bürgeramt", "70 EUR", "3 to 4 weeks"):
        assert kept in line
    assert "Great question" not in line and "hope this helps" not in line
    assert len(line) < 400


async def test_answer_is_condensed() -> None:
    filler = " ".join(
        f"Sentence {i} of the answer adds more general background about travel planning." for i in range(30)
    )
    result = await observe(
        user("What should I know about Lisbon?"), assistant(f"Lisbon trams cost 3 EUR. {filler}", 1)
    )
    (line,) = lines_of(result.observations)
    answer = line.split("Assistant answered: ", 1)[1]
    assert "3 EUR" in answer and len(answer) <= 260


async def test_request_answered_with_a_list_keeps_each_item_and_attribute() -> None:
    result = await observe(
        user("Can you recommend vegetarian restaurants in Lisbon?"),
        assistant(
            "Sure! Here are three options:\n\n"
            "1. **Ao 26 Vegan Food Project** – fully vegan, Chiado, around 15 EUR per person\n"
            "2. **Jardim das Cerejas** – vegetarian buffet, Bairro Alto, 10 EUR\n"
            "3. **PSI** – organic, in the Jardim da Estrela park, great terrace\n",
            1,
        ),
    )
    line = line_with(
        result.observations, "User asked the assistant to recommend vegetarian restaurants in Lisbon"
    )
    for kept in (
        "Ao 26 Vegan Food Project",
        "Chiado",
        "15 EUR",
        "Jardim das Cerejas",
        "Bairro Alto",
        "PSI",
        "Estrela",
    ):
        assert kept in line


async def test_unanswered_question_sets_current_task() -> None:
    result = await observe(user("What's the best time to visit the Azores?"))
    assert lines_of(result.observations) == [
        "* 🟡 (14:30) User asked what's the best time to visit the Azores."
    ]
    assert result.current_task == (
        "User asked what's the best time to visit the Azores; waiting for the assistant's answer"
    )
    assert (
        result.suggested_response
        == "Answer the user's question about What's the best time to visit the Azores"
    )


async def test_unanswered_request_sets_current_task() -> None:
    result = await observe(user("Please draft an email to my landlord about the heating."))
    assert result.current_task is not None and "draft an email to their landlord" in result.current_task
    assert result.suggested_response is not None and result.suggested_response.startswith("Continue with")


async def test_answered_question_leaves_no_open_task() -> None:
    result = await observe(
        user("What's the capital of Portugal?"), assistant("The capital of Portugal is Lisbon.", 1)
    )
    assert (
        result.current_task
        == "No open request; last topic: User asked what's the capital of Portugal (answered)"
    )
    assert result.suggested_response is None


async def test_assistant_question_means_waiting_for_the_user() -> None:
    result = await observe(user("Find me a hotel in Porto."), assistant("Which dates do you need it for?", 1))
    assert result.current_task is not None and "Waiting for the user's reply" in result.current_task
    assert result.suggested_response is not None and "Wait for the user's reply" in result.suggested_response


async def test_no_hints_for_buffered_cycles() -> None:
    result = await observe(user("What's the weather in Oslo?"), continuation_hints=False)
    assert result.current_task is None and result.suggested_response is None


async def test_no_new_request_keeps_the_previous_task() -> None:
    result = await observe(user("I live in Oslo."), current_task="Planning the Oslo move")
    assert result.current_task == "Planning the Oslo move"


# --------------------------------------------------------------------------------------------
# Assistant content, completions
# --------------------------------------------------------------------------------------------


async def test_assistant_completion_is_done_line() -> None:
    result = await observe(
        user("Book Nopa for 4 people on Friday at 19:30."),
        assistant("Done! I've booked the table at Nopa for 4 people on Friday at 19:30.", 1),
    )
    done = "* ✅ (14:31) Assistant booked the table at Nopa for 4 people on Friday at 19:30"
    assert f"{done} (meaning Jun 20, 2025)." in result.observations
    assert (
        "* 🟡 (14:30) User asked the assistant to book Nopa for 4 people on Friday at 19:30"
        in result.observations
    )


async def test_user_confirmation_of_a_suggestion_is_done_line() -> None:
    result = await observe(
        user("My router keeps dropping the connection."),
        assistant("You should try switching the Wi-Fi channel to 11 in the router settings.", 1),
        user("Thanks, that worked!", 5),
    )
    line = line_with(result.observations, "User confirmed")
    assert line.startswith(
        "* ✅ (14:35) User confirmed it worked (re: You should try switching the Wi-Fi channel"
    )


async def test_user_reports_own_completion() -> None:
    result = await observe(user("I booked the flights to Rome for next Friday."))
    assert lines_of(result.observations) == [
        "* ✅ (14:30) User booked the flights to Rome for next Friday (meaning Jun 27, 2025)."
    ]


async def test_unprompted_recommendation_is_kept() -> None:
    result = await observe(
        assistant("I'd recommend the 434 bus up to Pena Palace, it leaves from Sintra station.")
    )
    assert (
        "* 🟡 (14:30) Assistant recommended: I'd recommend the 434 bus up to Pena Palace"
        in result.observations
    )


async def test_assistant_pleasantries_are_dropped() -> None:
    result = await observe(
        user("I moved to Berlin last month."),
        assistant(
            "That's wonderful news! Moving is always exciting and a bit stressful. Enjoy your new home!", 1
        ),
    )
    assert lines_of(result.observations) == [
        "* 🔴 (14:30) User stated they moved to Berlin last month (meaning May 2025)."
    ]


async def test_code_blocks_are_summarised() -> None:
    code = "```python\ndef parse(text):\n    return text\n\nclass Clock:\n    pass\n```"
    result = await observe(user("Show me a parser."), assistant(f"Here you go:\n{code}", 1))
    assert "Assistant provided python code (5 lines) defining parse, Clock" in result.observations


# --------------------------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------------------------


async def test_tool_call_and_result_become_one_outcome_line() -> None:
    result = await observe(
        tool_call("c1", "get_weather", {"city": "Berlin"}),
        tool_result("c1", "get_weather", {"temp": "12°C", "conditions": "cloudy"}, 1),
    )
    assert lines_of(result.observations) == [
        "* 🟡 (14:30) Assistant ran get_weather(city=Berlin) -> temp: 12°C, conditions: cloudy."
    ]


async def test_tool_error_is_reported() -> None:
    result = await observe(
        tool_call("c1", "send_email", {"to": "bob"}),
        tool_result("c1", "send_email", "invalid recipient", error=True),
    )
    assert "Assistant ran send_email(to=bob) -> error: invalid recipient." in result.observations


async def test_identical_tool_runs_are_merged_with_a_count() -> None:
    messages: list[Message] = []
    for i in range(3):
        messages += [tool_call(f"c{i}", "ping", {"host": "db"}, i), tool_result(f"c{i}", "ping", "ok", i)]
    result = await observe(*messages)
    assert lines_of(result.observations) == ["* 🟡 (14:30) Assistant ran ping(host=db) -> ok (ran 3 times)."]


async def test_many_runs_of_one_tool_are_grouped_under_a_parent() -> None:
    messages: list[Message] = []
    for i, path in enumerate(["a.py", "b.py", "c.py"]):
        messages += [
            tool_call(f"c{i}", "read_file", {"path": path}, i),
            tool_result(f"c{i}", "read_file", f"{i} lines", i),
        ]
    result = await observe(*messages)
    assert result.observations.splitlines()[1:] == [
        "* 🟡 (14:30) Assistant ran read_file 3 times:",
        "  * -> (path=a.py) -> 0 lines",
        "  * -> (path=b.py) -> 1 lines",
        "  * -> (path=c.py) -> 2 lines",
    ]


async def test_long_tool_results_are_condensed() -> None:
    rows = [{"name": f"Hotel {i}", "price": 100 + i, "stars": 4} for i in range(50)]
    result = await observe(
        tool_call("c1", "search_hotels", {"city": "Porto", "notes": "x" * 500}),
        tool_result("c1", "search_hotels", {"results": rows, "currency": "EUR"}),
    )
    (line,) = lines_of(result.observations)
    assert "results: 50 items" in line and "Hotel 0" in line
    assert len(line) < 260


async def test_tool_call_without_result() -> None:
    result = await observe(tool_call("c1", "long_job", {"id": 7}))
    assert "Assistant ran long_job(id=7) -> no result yet." in result.observations


# --------------------------------------------------------------------------------------------
# Small talk, parts, dedupe
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "said", ["ok", "thanks!", "lol", "how are you?", "Hi there!", "cool, sounds good", "good morning :)"]
)
async def test_small_talk_is_dropped(said: str) -> None:
    assert (await observe(user(said))).observations == ""


async def test_reasoning_and_data_parts_are_skipped_files_are_named() -> None:
    message = Message(
        role="user",
        parts=(
            ReasoningPart(text="Secret plan involving Zanzibar"),
            DataPart(name="om-marker", data={"city": "Timbuktu"}),
            FilePart(media_type="image/png", filename="photo.png", url="https://x/photo.png"),
            FilePart(media_type="application/pdf", filename="report.pdf", url="https://x/report.pdf"),
        ),
        created_at=WEDNESDAY,
    )
    result = await observe(message)
    assert "Zanzibar" not in result.observations and "Timbuktu" not in result.observations
    assert "User shared an image photo.png" in result.observations
    assert "User shared a file report.pdf" in result.observations


async def test_file_caption_is_attached() -> None:
    message = Message(
        role="user",
        parts=(
            TextPart(text="Here's a photo of my new flat"),
            FilePart(media_type="image/jpeg", filename="flat.jpg"),
        ),
        created_at=WEDNESDAY,
    )
    result = await observe(message)
    assert lines_of(result.observations) == [
        "* 🟡 (14:30) User shared an image flat.jpg (a photo of their new flat)."
    ]


async def test_system_messages_are_ignored() -> None:
    result = await observe(Message.system("You are a helpful assistant for Acme Corp.", created_at=WEDNESDAY))
    assert result.observations == ""


async def test_lines_already_in_previous_observations_are_not_repeated() -> None:
    previous = "Date: Jun 1, 2025\n* 🔴 (09:00) User stated they live in Berlin."
    result = await observe(
        user("I live in Berlin."), user("I have a dog.", 1), previous_observations=previous
    )
    assert lines_of(result.observations) == ["* 🔴 (14:31) User stated they have a dog."]


async def test_repeated_lines_within_a_batch_are_kept_once() -> None:
    result = await observe(user("I live in Berlin."), user("I live in Berlin.", 1))
    assert len(lines_of(result.observations)) == 1


# --------------------------------------------------------------------------------------------
# Names and numbers survive
# --------------------------------------------------------------------------------------------


async def test_names_and_numbers_from_both_sides_survive() -> None:
    result = await observe(
        user("My dentist appointment with Dr. Albers is at 8:30 on Tuesday."),
        assistant(
            "Noted. The Charité emergency dental clinic on Aßmannshauser Straße is open until 22:00 "
            "if you ever need it, and a cleaning there usually costs around 90 EUR.",
            1,
        ),
        user("Which U-Bahn line goes to Kreuzberg?", 2),
        assistant("Take the U1 from Warschauer Straße; it runs every 5 minutes.", 3),
    )
    for kept in (
        "Dr. Albers",
        "8:30",
        "Charité",
        "Aßmannshauser Straße",
        "22:00",
        "90 EUR",
        "U1",
        "Warschauer Straße",
        "5 minutes",
        "Kreuzberg",
    ):
        assert kept in result.observations, kept


# --------------------------------------------------------------------------------------------
# Title, hooks, counter, determinism, compression
# --------------------------------------------------------------------------------------------


async def test_title_is_a_short_topic_phrase_when_asked_for() -> None:
    messages = [
        user("I need help planning my Lisbon trip."),
        user("What are good Lisbon neighbourhoods for a trip with a kid?", 1),
        user("And which Lisbon museums are good for kids on a trip?", 2),
    ]
    title = (await observe(*messages, want_title=True)).thread_title
    assert title is not None and 2 <= len(title.split()) <= 5 and len(title) >= 3
    assert "Lisbon" in title
    assert (await observe(*messages, want_title=True, thread_title="Existing")).thread_title is None
    assert (await observe(*messages)).thread_title is None


async def test_hook_extractors_run_inline_ones_get_no_value() -> None:
    seen: list[dict[str, Any]] = []

    async def remember(payload: dict[str, Any]) -> Any:
        seen.append(payload)
        return {"lines": payload["current"].count("\n* ")}

    async def broken(payload: dict[str, Any]) -> Any:
        raise RuntimeError("hook exploded")

    extractors = (
        Extractor(name="Line count", instructions="", mode="hook", on_extracted=remember),
        Extractor(name="Broken", instructions="", mode="hook", on_extracted=broken),
        Extractor(name="Mood", instructions="the user's mood"),
    )
    result = await observe(
        user("I live in Oslo."), extractors=extractors, extracted={"line-count": {"lines": 0}}
    )
    assert seen == [{"previous": {"lines": 0}, "current": result.observations}]
    assert result.extracted == {"line-count": {"lines": 1}}
    assert result.extraction_failures == {"broken": "hook exploded"}


async def test_custom_token_counter_is_used() -> None:
    calls: list[str] = []

    def counter(text: str) -> int:
        calls.append(text)
        return len(text) // 4

    await OfflineObserver(count_tokens=counter).observe(
        ObservationRequest(messages=[user("I live in Oslo.")])
    )
    assert calls


async def test_deterministic_output() -> None:
    messages = realistic_conversation()
    first = await OfflineObserver().observe(ObservationRequest(messages=messages, want_title=True))
    second = await OfflineObserver().observe(ObservationRequest(messages=list(messages), want_title=True))
    assert first == second
    assert first.observations.encode() == second.observations.encode()


async def test_chatty_conversation_compresses_at_least_five_times() -> None:
    messages = chatty_conversation()
    raw = sum(estimate_tokens(m.text) for m in messages)
    result = await observe(*messages)
    out = estimate_tokens(result.observations)
    assert raw / out >= 5, (raw, out, result.observations)
    for fact in ("Freiburg", "Lena", "3 kids", "gluten", "Bologna", "Sep 12, 2025", "420 EUR"):
        assert fact in result.observations, fact


# --------------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------------


def realistic_conversation() -> list[Message]:
    """20 messages: small talk, facts, a plan, Q&A, a tool run, a list, a booking, a file."""
    weather = {"temp": "24°C", "conditions": "sunny", "humidity": "40%"}
    return [
        user("Hi there! How are you today?", 0, SUNDAY),
        assistant("Hello! I'm doing great, thanks for asking. How can I help you today?", 0.5, SUNDAY),
        user(
            "So I finally moved to Berlin last month, the flat is in Kreuzberg. I'm going to visit Lisbon "
            "next Friday with my sister Anna.",
            1,
            SUNDAY,
        ),
        assistant(
            "That's exciting! Lisbon in June is lovely, and you'll probably catch the Santo António "
            "festival.",
            1.5,
            SUNDAY,
        ),
        user("How do I renew my passport? It expires in August.", 2, SUNDAY),
        assistant(
            "Great question! In Germany you renew a passport at your local Bürgeramt. You need to book an "
            "appointment online, bring your old passport and a biometric photo, and pay a fee of 70 EUR. "
            "I hope this helps!",
            3,
            SUNDAY,
        ),
        user("ok thanks!", 4, SUNDAY),
        user("What's the weather like in Lisbon right now?", 5, SUNDAY),
        Message(
            role="assistant",
            parts=(
                ReasoningPart(text="I should call the weather tool."),
                ToolCallPart(tool_call_id="c1", tool_name="get_weather", args={"city": "Lisbon"}),
            ),
            created_at=SUNDAY + timedelta(minutes=5.2),
        ),
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id="c1", tool_name="get_weather", result=weather),),
            created_at=SUNDAY + timedelta(minutes=5.3),
        ),
        assistant("It's currently 24°C and sunny in Lisbon. Perfect beach weather!", 5.5, SUNDAY),
        user(
            "I'm allergic to shellfish and I prefer vegetarian restaurants. Can you recommend a few places "
            "in Lisbon?",
            7,
            SUNDAY,
        ),
        assistant(
            "Sure! Here are some options:\n1. **Ao 26 Vegan Food Project** – fully vegan, Chiado, 15 EUR\n"
            "2. **Jardim das Cerejas** – vegetarian buffet, Bairro Alto, 10 EUR\n"
            "Would you like me to book a table?",
            8,
            SUNDAY,
        ),
        user("Yes please, book Ao 26 for 2 people on Saturday at 19:30.", 9, SUNDAY),
        Message(
            role="assistant",
            parts=(
                ToolCallPart(
                    tool_call_id="c2",
                    tool_name="book_table",
                    args={"restaurant": "Ao 26", "party_size": 2, "time": "2025-06-21T19:30"},
                ),
            ),
            created_at=SUNDAY + timedelta(minutes=9.2),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(
                    tool_call_id="c2",
                    tool_name="book_table",
                    result={"status": "confirmed", "confirmation": "AO26-4471"},
                ),
            ),
            created_at=SUNDAY + timedelta(minutes=9.3),
        ),
        assistant(
            "Done! I've booked a table at Ao 26 for 2 people on Saturday, June 21 at 19:30. Your "
            "confirmation code is AO26-4471.",
            9.5,
            SUNDAY,
        ),
        user("Perfect, thanks. lol", 10, SUNDAY),
        Message(
            role="user",
            parts=(
                TextPart(text="Here's a photo of my new flat"),
                FilePart(media_type="image/jpeg", filename="flat.jpg"),
            ),
            created_at=SUNDAY + timedelta(minutes=11),
        ),
        user(
            "Also my email is now anna.k@example.org. Could you draft a short message to my landlord "
            "Mr. Weber about the broken heating?",
            12,
            SUNDAY,
        ),
    ]


_PLEASANTRIES = (
    "That's a really great question, and I'm glad you asked it, because a lot of people wonder about "
    "exactly the same thing when they are in a similar situation. "
)
_WRAP_UP = (
    " I hope this helps, and please don't hesitate to let me know if there is anything else at all "
    "that I can help you with, whether it is big or small. Have a wonderful day!"
)
_GENERAL = (  # the general, padded advice a chat model adds to nearly every reply
    "\n\nA few general things are worth keeping in mind as well. It usually pays off to plan ahead, "
    "to keep a little flexibility in the schedule and to leave some room for rest, especially when "
    "travelling with children, because everyone tends to get tired more quickly than expected. "
    "It can also help to write down the most important details somewhere easy to find, so that "
    "nothing gets lost in the excitement of the moment.\n\nFinally, remember that every family is "
    "different, so what works well for one group of people might not be ideal for another. Trust "
    "your own judgement, ask around for personal experiences, and adapt the plan as you go along."
)


def chatty_conversation() -> list[Message]:
    """Small talk and long, padded assistant replies around a handful of real facts."""
    turns = [
        (
            "Hey! How's it going?",
            "Hi there! I'm doing really well, thank you so much for asking. It's always "
            "lovely to chat. How are you doing today, and what can I help you with?",
        ),
        (
            "I'm good, thanks. I live in Freiburg with my wife Lena and our 3 kids.",
            "That sounds absolutely lovely! Freiburg is such a charming city, with its sunny climate, the "
            "little Bächle canals running through the old town and the beautiful Black Forest right on the "
            "doorstep. Having a big family must keep life busy and full of joy, too.",
        ),
        (
            "lol yes, it's chaos. Also I'm gluten intolerant, which makes eating out tricky.",
            "Oh, I completely understand, that can really be a challenge! Eating out with a dietary "
            "restriction often means asking lots of questions, reading menus carefully and sometimes "
            "feeling like you are being a bother. Many restaurants are getting much better at this, "
            "though, and it is becoming more and more common to see clear labels on menus these days.",
        ),
        (
            "We're going to visit Bologna on September 12.",
            "How exciting, that sounds like a fantastic trip! Bologna is a wonderful city with a rich "
            "history, beautiful porticoes, a lively university atmosphere and of course an amazing food "
            "culture that many people consider the best in all of Italy. I'm sure the whole family will "
            "have a truly memorable time exploring it together.",
        ),
        (
            "What should we budget for the hotel?",
            _PLEASANTRIES + "For a family of five in a central Bologna hotel in September, you should "
            "expect to pay roughly 420 EUR for three nights in a family room. Prices can vary quite a "
            "bit depending on the exact dates, the neighbourhood and how early you book, so it is "
            "generally a good idea to compare a few options and to keep an eye out for special offers "
            "and flexible cancellation policies." + _WRAP_UP,
        ),
        (
            "ok cool, thanks!",
            "You're very welcome! It was my pleasure. Enjoy the planning, and feel free "
            "to come back any time you have more questions.",
        ),
        (
            "haha will do. how are you anyway?",
            "That's so kind of you to ask! I'm just a program, so I don't have days in quite the same way "
            "you do, but I always enjoy a good conversation, and this one has been a real pleasure.",
        ),
        (
            "Is the weather nice there in autumn?",
            _PLEASANTRIES + "Generally speaking, the autumn weather there tends to be pleasant and mild, "
            "with warm days early in the season and cooler evenings later on, so it is a nice time for "
            "walking around the city and sitting outside at cafés in the afternoon sunshine." + _WRAP_UP,
        ),
    ]
    messages: list[Message] = []
    for i, (said, answer) in enumerate(turns):
        padded = answer + _GENERAL if len(answer) > 300 else answer
        messages += [user(said, 2 * i), assistant(padded, 2 * i + 1)]
    return messages


def test_conversation_fixture_sizes() -> None:
    assert len(realistic_conversation()) == 20
    assert re.search(r"Freiburg", " ".join(m.text for m in chatty_conversation()))


# --------------------------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------------------------

_WORDS = st.sampled_from(
    "I I'm my we you it is was will next Friday tomorrow yesterday moved to from Berlin Munich "
    "live work at love hate want need plan ? ! . , : ; - * 1. 12 3.5 EUR $40 14:30 June 20 2025 "
    "thanks ok lol done booked sent how what can please no longer now instead of ``` ( ) [ ] "
    "Dr. e.g. café Straße 🙂 \n".split(" ")
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.lists(_WORDS, max_size=40)), max_size=6))
async def test_any_text_is_observed_without_error(turns: list[tuple[str, list[str]]]) -> None:
    messages = [(user if role == "user" else assistant)(" ".join(words) or ".") for role, words in turns]
    first = await observe(*messages, want_title=True)
    assert first == await observe(*messages, want_title=True)
    for group in parse_observations(first.observations):
        assert group.day is not None
        assert all(line.text for line in group.lines)


async def test_odd_tool_payloads_are_compacted() -> None:
    payloads: list[Any] = [
        b"bytes",
        [[1, 2], [3]],
        {"a": {"b": {"c": [1, {"d": 2}]}}},
        3.5,
        True,
        "",
        "{not json",
    ]
    messages: list[Message] = []
    for i, payload in enumerate(payloads):
        messages += [tool_call(f"c{i}", f"t{i}", {"x": payload}), tool_result(f"c{i}", f"t{i}", payload)]
    messages.append(tool_call("s", "raw", "not-json-args"))  # type: ignore[arg-type]
    result = await observe(*messages)
    assert len(lines_of(result.observations)) == len(payloads) + 1


PATHOLOGICAL = ["A" * 20000, "a" * 20000, "I " * 10000, "my " * 7000, "Ab, " * 5000, "x" + " " * 20000 + ",y"]


@pytest.mark.parametrize("text", PATHOLOGICAL, ids=["caps", "word", "I", "my", "commas", "spaces"])
async def test_long_degenerate_text_is_observed_into_a_bounded_record(text: str) -> None:
    # How the time grows with such inputs is measured, not asserted: every shape here is one of
    # benchmarks/pathological.py's (`python benchmarks/pathological.py` prints the growth ratios).
    result = await observe(user(text))
    assert len(result.observations) < 2_000, "a degenerate message is not copied into memory"


@pytest.mark.parametrize(
    ("said", "line"),
    [
        ("Go through the page and list every broken link.", "User asked the assistant to go through the page and list every broken link"),
        ("Keep it under 200 words.", "User asked the assistant to keep it under 200 words"),
        ("Crawl all pages and summarise", "User asked the assistant to crawl all pages and summarise"),
        ("Try the other endpoint.", "User asked the assistant to try the other endpoint"),
        ("Double-check the totals in the March invoice.", "User asked the assistant to double-check the totals in the March invoice"),
    ],
)
async def test_an_instruction_whose_verb_no_list_names_is_kept_as_a_request(said: str, line: str) -> None:
    """A user's instruction was dropped as a remark that names nothing (found by a tool loop whose
    question was observed alone: the model then had neither the question nor a line for it)."""
    result = await observe(user(said))
    assert [text.split(") ", 1)[1].rstrip(".") for text in lines_of(result.observations)] == [line]


@pytest.mark.parametrize(
    "said",
    [
        "Running the tests takes forever.",
        "Watched the game last night.",
        "Back from dinner. Even my old school friend Lisa came down from Regensburg.",
        "Yesterday the build broke.",
    ],
)
async def test_narration_shaped_like_an_instruction_is_not_a_request(said: str) -> None:
    result = await observe(user(said))
    assert not any("asked the assistant" in text for text in lines_of(result.observations))
