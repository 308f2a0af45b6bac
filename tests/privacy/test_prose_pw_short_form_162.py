"""A password said right after "pw" or "password", no colon or copula, never reaches the memory
models (helper-162).

Before: with privacy on, "netflix pw Tulip77x", "my pw hunter2hunter", "gmail password Orchid55k"
reached the hosted observer in clear and the observations it wrote kept them ("wifi pw:
hunter2hunter" was redacted already). Only a value no word could be counts here (letters and
digits, six or more): "reset your password here", "the pw reset link", "password VARCHAR2(100)"
and "password manager 1Password" are left as written.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("netflix pw Tulip77x", "Tulip77x"),
    ("my pw hunter2hunter", "hunter2hunter"),
    ("Spotify PW Marig0ld!x, don't share", "Marig0ld!x"),
    ("gmail password Orchid55k", "Orchid55k"),
    ("the router passwd 8842swordfish.", "8842swordfish"),
    ("wifi pw 20480311", "20480311"),
    # with a colon: redacted before too, kept so
    ("wifi pw: hunter2hunter", "hunter2hunter"),
]

#: Ordinary sentences with the same words: left as written (before and after).
ORDINARY = [
    "reset your password here",
    "The password is unbreakable.",
    "the password is long enough",
    "the pw reset link expired",
    "Send the pw reset email again.",
    "password VARCHAR2(100) NOT NULL",
    "I keep every password in 1Password.",
    "My password manager 1Password is great.",
    "The pw field needs 12 characters.",
    "password sha256 hashing is not enough",
    "Password policy v2 applies from Monday.",
    "the password 2FA step",
]


async def test_short_form_passwords_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


async def test_ordinary_sentences_about_passwords_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_password_alone_is_replaced_and_redaction_is_idempotent(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_password_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)


ADVERSARIAL = ["pw ", "pw a1", "password " + "a1" * 150 + "(", "pw pw pw pw a1b2c3(", "passwd x" + "1" * 300 + " "]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_the_short_form(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND
