"""A short password of letters only, said after "my password is" or "pw", never reaches the memory
models (helper-162).

Before: with privacy on, "my password is tulipsun", "My wifi password is qwertyzx.", "pw:
qwertyzx" and "the pw is bluemoon" reached the hosted observer in clear and the observations it
wrote kept them: a letters-only password counted only when twelve letters or more, capitalised
or quoted. Now one of six letters or more counts after a cue that says whose password it is ("my",
"our", "your", "his", "her", "their") or after "pw", unless it is a word that says what a
password is like ("The password is unbreakable.", "my password is wrong", "my password is
garbage", "my password is expired"): those reach the observer as written.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("my password is tulipsun", "tulipsun"),
    ("My wifi password is qwertyzx.", "qwertyzx"),
    ("our netflix password is bluemoon, don't tell", "bluemoon"),
    ("my password for the bank is sunpetal", "sunpetal"),
    ("Her pw is zxcvbnm and she never changes it.", "zxcvbnm"),
    ("pw: hollyoak", "hollyoak"),
    ("the pw is frostpine", "frostpine"),
    ("his password is oakforest", "oakforest"),
    ("My password is now Tulipa.", "Tulipa"),
    # redacted before too (the assignment form): kept so
    ("password: qwertyzx", "qwertyzx"),
]

#: Ordinary sentences with the same words: left as written (before and after).
ORDINARY = [
    "The password is unbreakable.",
    "the password is long enough",
    "my PIN is the same as before",
    "the code is in the repo",
    "reset your password here",
    "int pin = 2048;",
    "my password is wrong",
    "My password is expired.",
    "My password is different.",
    "my password is correct",
    "My password is incorrect.",
    "my password is case-sensitive",
    "my password is required",
    "My password is changed.",
    "my password is strong, I think",
    "my password is secure",
    "my password is twelve characters",
    "my password is garbage.",
    "My password is nonsense.",
    "my password is somewhere",
    "my pw is weak",
    "the pw is useless",
    "my password is simple",
    "my password is terrible",
    "My password is unique.",
    "my password is common",
    "my password is below",
    "my password is sixteen",
    "My password is hacked!",
    "Is my password strong enough?",
    "my password is written on a sticky note",
    "The password is straightforward.",
    "My Password Is Obsolete",
    "My password is personal.",
    "my password is confidential",
    "My password is broken.",
    "my password is the strongest",
    "my password is hidden",
]


async def test_short_letter_passwords_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


async def test_sentences_that_describe_a_password_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_password_alone_is_replaced_and_redaction_is_idempotent(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_describing_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)


ADVERSARIAL = [
    "my ", "my a b password ", "my password is ", "pw is ", "pw: ", "my a password for a b c d is ",
    "my password is " + "a" * 70 + " ", "pw pw: pw is my pw is ",
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_the_cued_letters(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND
