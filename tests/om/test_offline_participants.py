"""The offline observer and reflector on a conversation between named people."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest

from obsmem.om.text.format import PRIORITY_HIGH, PRIORITY_MEDIUM, ObservationLine
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.offline.participants import (
    fit_participants,
    general_rarity,
    is_participant_conversation,
    is_participant_line,
    merge_speaker_days,
    participant_line,
    telegraphic,
)
from obsmem.om.offline.patterns import fact_key
from obsmem.om.offline.rules import estimate_tokens
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.types import Message

pytestmark = pytest.mark.anyio
DAY = date(2023, 5, 8)


def said(text: str, *, known: str = "", name: str = "Melanie") -> str | None:
    line = participant_line(text, name, DAY, known, estimate_tokens, ["Caroline"])
    return None if line is None else line.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I ran a charity race for mental health last Saturday.",
            "Melanie: ran charity race mental health last Saturday (meaning May 6, 2023)",
        ),
        ("Thanks, Caroline! That sounds amazing.", None),  # a reaction addressed to the listener
        ("What got you into running?", None),  # a question states nothing
        ("Your painting is so beautiful, Caroline!", None),  # about the listener: theirs to record
        (
            "I'm training for the Lisbon marathon in May.",
            "Melanie: training Lisbon marathon May (meaning May 2023)",
        ),
        ("Haha yeah.", None),
    ],
)
def test_participant_lines(text: str, expected: str | None) -> None:
    result = said(text)
    if expected is None:
        assert result is None
    else:
        assert result is not None and result.startswith(expected)


def test_narration_already_recorded_is_not_repeated() -> None:
    known = "melanie: signed up for pottery class yesterday"
    assert said("I signed up for a pottery class!", known=known) is None


def test_a_name_or_date_makes_a_fact_and_bare_narration_a_topic() -> None:
    fact = participant_line("I finished reading Charlotte's Web.", "Mel", DAY, "", estimate_tokens)
    topic = participant_line(
        "I spent the afternoon baking bread with my kids.", "Mel", DAY, "", estimate_tokens
    )
    assert fact is not None and fact.priority == PRIORITY_HIGH
    assert topic is not None and topic.priority == PRIORITY_MEDIUM


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Melanie: they signed up for a pottery class; it is like therapy for them (meaning Jul 2, 2023).",
            "Melanie: signed up pottery class; like therapy (meaning Jul 2, 2023).",
        ),
        (
            'Caroline: they loved "The Art of Being" by the author',
            'Caroline: loved "The Art of Being" by author',
        ),
        ("Ben: the race is in May and Will is coming", "Ben: race May Will coming"),
        ("User stated they live in Berlin", "User stated live Berlin"),  # callers choose which lines
    ],
)
def test_telegraphic(text: str, expected: str) -> None:
    assert telegraphic(text) == expected


def test_participant_line_detection() -> None:
    assert is_participant_line("Melanie: ran a race.")
    assert is_participant_line("Mary Ann: likes tea.")
    for text in ("User stated they like tea.", "Topics: a; b.", "Assistant: booked it.", "no colon here"):
        assert not is_participant_line(text)


def _message(role: str, text: str, name: str | None, minute: int) -> Message:
    metadata = {"name": name} if name else {}
    return Message(role=role, parts=({"type": "text", "text": text},),  # type: ignore[arg-type]
                   created_at=datetime(2023, 5, 8, 13, minute, tzinfo=UTC), metadata=metadata)  # fmt: skip


def test_people_mode_needs_a_named_assistant() -> None:
    user_named = [_message("user", "hi", "Caroline", 0), _message("assistant", "hello", None, 1)]
    both_named = [_message("user", "hi", "Caroline", 0), _message("assistant", "hello", "Melanie", 1)]
    assert not is_participant_conversation(user_named)
    assert is_participant_conversation(both_named)


async def test_observer_writes_one_line_per_speaker_message() -> None:
    messages = [
        _message(
            "user",
            "Hey Mel! I went to a LGBTQ support group yesterday and it was so powerful.",
            "Caroline",
            0,
        ),
        _message(
            "assistant", "Wow, Caroline! I painted a lake sunrise last year, my favourite.", "Melanie", 1
        ),
        _message("user", "That's so cool! What inspired you?", "Caroline", 2),
    ]
    result = await OfflineObserver().observe(ObservationRequest(messages=messages, timezone=UTC))
    lines = [line for line in result.observations.splitlines() if line.startswith("*")]
    assert len(lines) == 2
    assert "Caroline: went LGBTQ support group yesterday" in lines[0]
    assert "(meaning May 7, 2023)" in lines[0]
    assert "Melanie: painted lake sunrise last year" in lines[1] and "(meaning 2022)" in lines[1]
    assert "Assistant" not in result.observations and "User" not in result.observations


@dataclass
class _Entry:
    day: date | None
    line: ObservationLine
    old: bool = True


def test_merge_folds_one_speakers_old_day_into_one_unmarked_line() -> None:
    entries = [
        _Entry(DAY, ObservationLine("Mel: baked bread", PRIORITY_MEDIUM, "10:00")),
        _Entry(DAY, ObservationLine("Ana: went hiking", PRIORITY_MEDIUM, "10:01")),
        _Entry(DAY, ObservationLine("Mel: adopted dog Rex", PRIORITY_HIGH, "10:02")),
        _Entry(DAY, ObservationLine("Mel: recent line", PRIORITY_MEDIUM, "10:03"), old=False),
        _Entry(DAY + timedelta(days=1), ObservationLine("Mel: next day", PRIORITY_MEDIUM, "09:00")),
    ]
    merged = merge_speaker_days(entries)
    assert [e.line.text for e in merged] == [
        "Mel: baked bread; adopted dog Rex.",
        "Ana: went hiking.",
        "Mel: recent line",
        "Mel: next day.",
    ]
    # a merged old day holds notes of every worth, weighed one by one from here on: no mark
    assert [e.line.priority for e in merged] == [None, None, PRIORITY_MEDIUM, None]
    assert merged[0].line.render() == "* Mel: baked bread; adopted dog Rex."


def test_fit_drops_the_least_valuable_notes_and_never_a_user_fact() -> None:
    entries = [
        _Entry(
            DAY,
            ObservationLine(
                "Mel: nice day; adopted dog Rex in Lisbon (meaning May 7, 2023); ok then",
                PRIORITY_HIGH,
                "10:00",
            ),
        ),  # fmt: skip
        _Entry(DAY, ObservationLine("User stated they are allergic to cashews", PRIORITY_HIGH, "10:01")),
    ]
    fitted = fit_participants(entries, excess_tokens=5, count_tokens=estimate_tokens)
    texts = [e.line.text for e in fitted]
    assert texts[1] == "User stated they are allergic to cashews"
    assert "adopted dog Rex in Lisbon" in texts[0]
    assert "nice day" not in texts[0] or "ok then" not in texts[0]
    emptied = fit_participants(entries[:1], excess_tokens=10_000, count_tokens=estimate_tokens)
    assert emptied == []  # a line left with no note goes


def _talk(days: int, notes: Callable[[int], list[str]]) -> str:
    """Observations of ``days`` days from Jan 1, 2023: each day's header, then ``notes(day)``."""
    lines = []
    for day in range(days):
        when = date(2023, 1, 1) + timedelta(days=day)
        lines.append(f"Date: {when.strftime('%b')} {when.day}, {when.year}")
        lines.extend(notes(day))
    return "\n".join(lines)


async def test_reflection_of_a_long_talk_fits_its_goal() -> None:
    observations = _talk(40, lambda day: [
        f"* 🔴 (10:0{n}) {('Ana', 'Ben')[n % 2]}: told story number {day}-{n} about trip to Place{day}x{n} "
        f"with friend Person{day}y{n} and it was lovely"
        for n in range(4)
    ])
    result = await OfflineReflector(count_tokens=estimate_tokens).reflect(
        ReflectionRequest(observations=observations, target_tokens=2_000)
    )
    assert estimate_tokens(result.observations) <= 2_000
    assert "Place39x3" in result.observations  # the newest lines keep their detail


async def test_an_old_medium_speaker_line_is_not_cut_at_a_length() -> None:
    # a 🟡 line of a named speaker holds several notes; cutting it at 100 characters, as an old
    # 🟡 user line is cut, dropped the notes at its end whatever they were worth
    observations = _talk(12, lambda day: [
        f"* 🟡 {speaker}: talked about the weather, the local news and the garden fence; "
        f"walked to the corner shop for bread, cheese and milk; bought a new kite called "
        f"Zephyr{day}{speaker}"
        for speaker in ("Ana", "Ben")
    ])
    result = await OfflineReflector(count_tokens=estimate_tokens).reflect(
        ReflectionRequest(observations=observations, target_tokens=1_000)
    )
    assert result.level >= 2 and estimate_tokens(result.observations) <= 1_000
    assert "Zephyr0Ana" in result.observations and "Zephyr0Ben" in result.observations


def test_a_relatives_name_is_not_the_users_name() -> None:
    sister = fact_key("User stated their sister is called Ilvana")
    dog = fact_key("User stated their dog is named Brixton")
    own = fact_key("User stated they are called Sam")
    assert sister is not None and dog is not None and own is not None
    assert len({sister.key, dog.key, own.key}) == 3  # so none supersedes another
    assert own.key == "name"


# -- issue 15: LoCoMo mode (what a long talk between people keeps) ------------------------------


def test_a_feeling_about_nothing_named_is_not_a_note() -> None:
    # two words nobody recorded, said in the first person, but neither says what happened
    assert said("It was so awesome, I really loved it!") is None
    assert said("I felt so proud and grateful.") is None
    # what happened stays, with or without the feeling around it
    kept = said("It was so awesome, I joined a pottery class downtown!")
    assert kept is not None and "joined pottery class downtown" in kept
    assert said("I spent the afternoon baking bread.") == "Melanie: spent afternoon baking bread"


def test_note_style_drops_colour_but_keeps_what_happened() -> None:
    assert telegraphic("Melanie: it was really awesome, ran a charity race; so proud") == (
        "Melanie: ran charity race; proud"
    )


def test_fit_weighs_what_happened_over_how_it_felt() -> None:
    # the feeling is the shorter note and its words are as rare, so by rarity per token alone it
    # would outrank the event; a note made of feeling words is worth nothing to keep
    text = "Mel: felt proud grateful; joined pottery class at downtown studio."
    line = ObservationLine(text, PRIORITY_HIGH)
    entries = [_Entry(DAY, line)]
    fitted = fit_participants(entries, excess_tokens=3, count_tokens=estimate_tokens)
    assert [e.line.text for e in fitted] == ["Mel: joined pottery class at downtown studio."]


def test_fit_keeps_the_note_in_uncommon_words() -> None:
    # by rarity in the log alone the second note is worth more (four words nobody repeats against
    # three); but "found", "place", "near" and "work" are everyday English, and a violin and an
    # aunt are what a later question asks about
    line = ObservationLine("Mel: bought violin from aunt; found place near work.", PRIORITY_HIGH)
    fitted = fit_participants([_Entry(DAY, line)], excess_tokens=3, count_tokens=estimate_tokens)
    assert [e.line.text for e in fitted] == ["Mel: bought violin from aunt."]


def test_general_rarity_ranks_everyday_words_below_specific_ones() -> None:
    assert general_rarity("work") < general_rarity("near") < general_rarity("violin")
    assert general_rarity("kundalini") == 1.0  # several tokens: rare
    assert all(0.1 <= general_rarity(word) <= 1.0 for word in ("the", "know", "aunt", "zzxq"))
    # a contraction is split into several tokens, but "it'll" and "couldn't" are no rare words;
    # a possessive is as rare as its noun
    assert general_rarity("it'll") == general_rarity("couldn't") == 0.1
    assert general_rarity("here's") == general_rarity("here") < 0.5
    assert general_rarity("violin's") == general_rarity("violin")


def _day_message(role: str, text: str, name: str, minute: int, day: int = 8) -> Message:
    when = datetime(2023, 5, day, 13, minute, tzinfo=UTC)
    return Message(role=role, parts=({"type": "text", "text": text},),  # type: ignore[arg-type]
                   created_at=when, metadata={"name": name})  # fmt: skip


async def test_a_speakers_notes_of_one_day_share_one_line() -> None:
    messages = [
        _day_message("user", "I adopted a puppy called Rex on Saturday.", "Caroline", 0),
        _day_message("assistant", "I signed up for a pottery class downtown.", "Melanie", 1),
        _day_message("user", "I taught Rex to sit and fetch a ball.", "Caroline", 2),
        _day_message("assistant", "My daughter Ida starts school in September.", "Melanie", 3),
        _day_message("user", "I start my counseling course next week.", "Caroline", 0, day=9),
    ]
    result = await OfflineObserver().observe(ObservationRequest(messages=messages, timezone=UTC))
    lines = [line for line in result.observations.splitlines() if line.startswith("*")]
    assert len(lines) == 3  # Caroline and Melanie on May 8, Caroline on May 9
    caroline = next(line for line in lines if "adopted puppy" in line)
    assert "Caroline: adopted puppy called Rex" in caroline and "; taught Rex sit fetch ball" in caroline
    melanie = next(line for line in lines if "Melanie:" in line)
    assert "pottery class" in melanie and "Ida starts school September" in melanie
    # the day dates what people told each other: no clock time on their lines
    assert not any(re.match(r"^\* \S+ \(\d\d:\d\d\)", line) for line in lines)
    assert "counseling course next week" in lines[-1] and "May 9" not in lines[-1]
