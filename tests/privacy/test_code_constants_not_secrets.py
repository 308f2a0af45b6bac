"""With privacy on, the short forms of a PIN or a door code (7240730, 1ce20fa: "PIN=2741",
"alarm: 4821", "PIN 4821") also ate constants of code a user pastes or talks about: an Arduino
sketch's "int pin = 2048;", "#define LED_PIN 1023", "RESET_PIN = 1234", "x.alarm = 4500",
"door = 1999" reached the observer as placeholders, so its observations lost the numbers. An
identifier (a name joined by "_" or "." to the word) and a lower-case "pin"/"alarm"/"door"/"gate"
assigned with "=" are code, not a code; the forms people use for their codes stay redacted."""

from __future__ import annotations

import pytest

from .hosted_observer import observed as _observed

pytestmark = pytest.mark.anyio

CODE = [
    "int pin = 2048;",
    "#define LED_PIN 1023",
    "GPIO_PIN 2048",
    "RESET_PIN = 1234",
    "pin = 12345 # GPIO",
    "timeout = 3000; alarm = 4500;",
    "x.alarm = 4500",
    "door = 1999",
    "gate = 5050",
    "self.pin = 4096",
]

SAID = [
    ("PIN=2741", "2741"),
    ("Pin = 5820", "5820"),
    ("PIN 4821", "4821"),
    ("alarm: 7296", "7296"),
    ("front door = 4821#", "4821#"),
    ("Alarm = 3958", "3958"),
    ("door code = 3852", "3852"),
    ("my PIN? 6185", "6185"),
]


async def test_code_constants_reach_the_observer_as_written() -> None:
    sent, _ = await _observed("\n\n".join(CODE) + "\n\n" + "word " * 40)
    sent = sent.replace("\n> ", "\n")  # the transcript quotes a message's next lines
    assert [line for line in CODE if line not in sent] == []
    assert "[REDACTED" not in sent


@pytest.mark.parametrize(("text", "secret"), SAID, ids=[text for text, _ in SAID])
async def test_the_codes_people_give_stay_redacted(text: str, secret: str) -> None:
    sent, kept = await _observed(text + "\n\n" + "word " * 40)
    assert sent and "User said" in kept
    assert secret not in sent and secret not in kept
