"""Issue 15, LoCoMo mode: how densely a talk between named people is kept.

A small hand-written two-speaker conversation goes through the public offline observer and
reflector; nothing here reads LoCoMo data.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import pytest

from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.offline.rules import estimate_tokens
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.types import Message

pytestmark = pytest.mark.anyio


def _said(text: str, name: str, minute: int, day: int = 8) -> Message:
    role = "user" if name == "Caroline" else "assistant"
    return Message(role=role, parts=({"type": "text", "text": text},),  # type: ignore[arg-type]
                   created_at=datetime(2023, 5, day, 13, minute, tzinfo=UTC), metadata={"name": name})  # fmt: skip


async def _notes(*messages: Message) -> list[str]:
    result = await OfflineObserver().observe(ObservationRequest(messages=list(messages), timezone=UTC))
    return [line for line in result.observations.splitlines() if line.startswith("*")]


async def test_a_note_between_people_drops_common_prepositions_but_keeps_what_happened() -> None:
    lines = await _notes(
        _said("I went to the beach with my kids in the morning and we built a sandcastle.", "Melanie", 0),
        _said("I signed up for a pottery class at the studio downtown on Friday.", "Caroline", 1),
    )
    melanie = next(line for line in lines if "Melanie:" in line)
    caroline = next(line for line in lines if "Caroline:" in line)
    assert "Melanie: went beach kids morning built sandcastle" in melanie
    # what happened stays: the particle of "signed up", the place, the day and its date
    assert "Caroline: signed up pottery class studio downtown Friday" in caroline
    assert "(meaning May 12, 2023)" in caroline
    for line in lines:
        words = re.findall(r"[a-z]+", line.split(": ", 1)[1])
        assert not {"to", "the", "with", "in", "for", "at", "on", "and", "a"} & set(words)


def _people_log(days: int) -> str:
    lines = []
    start = date(2023, 1, 1)
    for offset in range(days):
        when = start + timedelta(days=offset)
        lines.append(f"Date: {when.strftime('%b')} {when.day}, {when.year}")
        for n in range(2):
            speaker = ("Ana", "Ben")[n]
            lines.append(f"* 🔴 {speaker}: visited Town{offset}x{n} with friend Person{offset}y{n}; baked bread")
    return "\n".join(lines)


async def test_reflection_between_people_keeps_what_fits_not_half_of_it() -> None:
    # each reflection of a talk between people drops notes for good: it drops what the budget
    # needs (to at most 85% of the target), not everything above half of it
    observations = _people_log(60)
    target = estimate_tokens(observations) // 2
    result = await OfflineReflector(count_tokens=estimate_tokens).reflect(
        ReflectionRequest(observations=observations, target_tokens=target)
    )
    size = estimate_tokens(result.observations)
    assert 0.5 * target < size <= 0.85 * target
    assert "Town59x1" in result.observations  # the newest lines keep their detail



async def test_a_word_is_new_unless_recorded_as_a_word() -> None:
    # "art" sits inside "partner" and "ring" inside "bring", but neither was recorded: the note
    # brings two new words and is kept
    previous = "Date: May 8, 2023\n* 🔴 Melanie: partner will bring charcoal."
    messages = [
        _said("I made a ring and some art with charcoal.", "Melanie", 5),
        _said("Nice.", "Caroline", 6),
    ]
    result = await OfflineObserver().observe(
        ObservationRequest(messages=messages, previous_observations=previous, timezone=UTC)
    )
    assert "Melanie: made ring art charcoal" in result.observations


async def test_reflected_days_between_people_carry_no_priority_mark() -> None:
    # an old day's merged speaker line is weighed note by note, not by a mark: the two tokens
    # of "🔴" on every line go to notes instead
    observations = _people_log(60)
    assert observations.count("🔴") == 120
    target = estimate_tokens(observations) // 2
    result = await OfflineReflector(count_tokens=estimate_tokens).reflect(
        ReflectionRequest(observations=observations, target_tokens=target)
    )
    lines = [line for line in result.observations.splitlines() if line.startswith("*")]
    unmarked = [line for line in lines if re.match(r"^\* (?:Ana|Ben): ", line)]
    assert len(unmarked) >= len(lines) - 12  # all but the newest lines, kept as they were
    assert "* Ana: visited Town0x0" in result.observations or "Town0x0" not in result.observations
