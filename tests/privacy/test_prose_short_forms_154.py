"""The short ways people give a password or a door code never reach the memory models (helper-154).

Before: with privacy on, "pass: Hibiscus6w" (the word "pass" as the label), "alarm: 4821" (a code
labelled by what it opens), "alarm code 4821", "door code 1234#", "PIN 4821", "pin code 4821" (a
code word and its digits with no copula) and a password of letters only ("my password is
correcthorsebattery", "… is Sunflower") reached the hosted observer in clear, and the
observations it wrote kept them (README listed them as redacted by neither redaction nor
capture, or by capture only). Ordinary sentences with the same words ("I will pass the salt",
"the alarm went off at 7", "Boarding pass: AB12345", "Alarm: 0630", "The password is
straightforward.") are left as written, before and after.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import observed as _observed
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SHORT = [
    ("pass: Hibiscus6w", "Hibiscus6w"),
    ("wifi pass: Tulip77x", "Tulip77x"),
    ("My wifi pass is Orchid55k.", "Orchid55k"),
    ("router pass = Peony44r", "Peony44r"),
    ("alarm: 4821", "4821"),
    ("The alarm is 5937.", "5937"),
    ("keypad = 6048#", "6048#"),
    ("front door: 7159", "7159"),
    ("alarm code 8260", "8260"),
    ("Door code 9371# (the side entrance)", "9371#"),
    ("PIN 3482", "3482"),
    ("pin code 4593", "4593"),
    ("lockbox: 5604", "5604"),
]

#: A password of letters only, said so that no sentence about a password could mean it.
LETTERS = [
    ("my password is correcthorsebattery", "correcthorsebattery"),
    ("The password for the wifi is Sunflower.", "Sunflower"),
    ("my password is CorrectHorseStaple", "CorrectHorseStaple"),
    ('my password is "tulipa"', "tulipa"),
    ("My pw is now Marigold, don't share it.", "Marigold"),
    ("His passphrase was batterystaplehorse and he never changed it.", "batterystaplehorse"),
]

#: Ordinary sentences with the same words: left as written (before and after).
ORDINARY = [
    "I will pass the salt.",
    "Pass the salt, please.",
    "We need to pass the test first.",
    "the alarm went off at 7",
    "The alarm is set for 6:30.",
    "Alarm: 0630",
    "Doors: 1930",
    "Door: 1930",
    "Boarding pass: AB12345",
    "Tests pass: 3 of 5",
    "The second pass is x86-64 only.",
    "I'll pass to Player2 next.",
    "Connect it to pin 1024 on the header.",
    "The door is 2m wide.",
    "Gate: B22",
    "The password is straightforward.",
    "The password is unbreakable.",
    "The password is Required.",
    "The Password Is Obsolete",
    "The password is alphanumeric.",
    "The password is case-sensitive.",
    "The password was changed yesterday.",
    "My password manager is 1Password.",
    "My password is 12 characters long.",
    "The passcode is Face ID.",
    "The password is somewhere in my notes.",
    "The PIN is 4 digits.",
    "The gate is 3000 metres away.",
    "The front door: 3000 mm",
    "Alarm: 2400",
    "CI pass: build123 ok",
    "The password is Perfect.",
]


async def test_short_forms_never_reach_the_observer_or_the_observations() -> None:
    text = "\n\n".join(said for said, _ in SHORT) + "\n\n" + "word " * 40
    sent, kept = await _observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in SHORT if secret in sent] == []
    assert [secret for _, secret in SHORT if secret in kept] == []


async def test_letters_only_passwords_never_reach_the_observer_or_the_observations() -> None:
    text = "\n\n".join(said for said, _ in LETTERS) + "\n\n" + "word " * 40
    sent, kept = await _observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in LETTERS if secret in sent] == []
    assert [secret for _, secret in LETTERS if secret in kept] == []


async def test_ordinary_sentences_with_the_same_words_reach_the_observer_as_written() -> None:
    text = "\n\n".join(ORDINARY) + "\n\n" + "word " * 40
    sent, _ = await _observed(text)
    sent = sent.replace("\n> ", "\n")  # the transcript quotes a message's next lines
    assert [line for line in ORDINARY if line not in sent] == []
    assert "[REDACTED" not in sent


@pytest.mark.parametrize("text", [said for said, _ in SHORT + LETTERS])
def test_redaction_of_the_short_forms_is_idempotent(text: str) -> None:
    redactor = Redactor(b"k" * 32)
    once = redactor.redact(text).text
    assert once != text
    assert redactor.redact(once).text == once


#: Texts made of what the new forms start on, over and over: each start is tried once and gives
#: up within a bounded distance (the regexes' repetitions are all bounded), so redacting them
#: is linear. The count sees the Python work (a check per candidate value); the regexes' own
#: steps are measured in benchmarks/pathological.py.
ADVERSARIAL = [
    "pass ", "pass: ", "pass is now ", "pass:" + "a1" * 150 + " ", "alarm: 4", "alarm code ", "PIN ",
    "password for a b c d is ", "password is " + "a" * 70 + " ", 'password is "' + "a" * 70,
    "password is now Sunflower and ", "door = 1-2-3-4-5-6-7-8-9-0-1-2-", "password is pass: pass: alarm: ",
    'password is "ab cd ef gh ij kl mn op qr st ', "password is 'a-b-c-d-e-f-g-h-i-j-k-l ",
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_the_new_forms(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND


def test_a_megabyte_of_one_form_is_redacted_whole() -> None:
    text = "alarm code 4821, pass: Tulip77x; " * 32_000  # a megabyte
    redacted = Redactor(b"k").redact(text)
    assert redacted.counts == {"password": 64_000}
    assert "4821" not in redacted.text and "Tulip77x" not in redacted.text
