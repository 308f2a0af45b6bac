"""Issue 15, LoCoMo mode: which sentences of a talk between people become notes.

People in a chat leave out the subject ("Just started aerial yoga"), end a statement with a
question to the listener ("…, what do you think?") and wrap news in words to the listener
("Wanted to tell you - I took a writing class"). What the speaker states about their own life is
kept; the question and the words to the listener are not. Hand-written sentences only.
"""

from __future__ import annotations

from datetime import date

import pytest

from obsmem.om.offline.participants import participant_line
from obsmem.om.offline.rules import estimate_tokens

DAY = date(2023, 5, 8)


def said(text: str, *, name: str = "Maria") -> str | None:
    line = participant_line(text, name, DAY, "", estimate_tokens, ["John"])
    return None if line is None else line.text


@pytest.mark.parametrize(
    ("text", "contains"),
    [
        # the subject left out: the speaker did it
        ("Just started doing aerial yoga, it's great.", "Maria: started doing aerial yoga"),
        ("Been busy volunteering at the homeless shelter.", "Maria: busy volunteering homeless shelter"),
        # a statement that ends by asking the listener keeps the statement
        (
            "I made this bowl in pottery class last week, what do you think?",
            "Maria: made bowl pottery class last week (meaning week of May 1, 2023)",
        ),
        # news wrapped in words to the listener keeps the news
        (
            "Just wanted to give you the heads up - I took a creative writing class recently!",
            "Maria: took creative writing class recently",
        ),
    ],
)
def test_what_the_speaker_states_of_their_own_life_is_kept(text: str, contains: str) -> None:
    result = said(text)
    assert result is not None and contains in result
    assert "you" not in result.split(": ", 1)[1].split()


@pytest.mark.parametrize(
    "text",
    [
        "Did you know I have two cats?",  # opens as a question
        "What made you pick out the furniture?",
        "Have you tried any other cool workout classes?",
        "You found the perfect spot for your store.",  # about the listener: theirs to record
        "Sounds like you had a great time, what was your favourite part?",
    ],
)
def test_questions_and_words_to_the_listener_are_not_notes(text: str) -> None:
    assert said(text) is None


@pytest.mark.parametrize(
    ("text", "contains"),
    [
        (
            "Here's my latest work. [shares an image: a photo of a painting of a sunset with a palm tree]",
            "[photo: painting sunset palm tree]",
        ),
        (
            "I painted this last week. [shares an image: a photography of a sign for a new arrival]",
            "[photo: sign new arrival]",
        ),
    ],
)
def test_what_a_shared_photo_shows_is_written_in_notes_too(text: str, contains: str) -> None:
    result = said(text)
    assert result is not None and contains in result
