"""Ordinary prose about passwords, codes and keys reaches the memory models as written (helper-169).

Before: with privacy on, "password field2" (a form's field) and "security code 200 OK" (an HTTP
status) reached the hosted observer with a placeholder in place of "field2" and "200": the bare
forms of e534289 and 0ea731f took them for a password and a card's security code. An identifier
made of a word and a number after "password", and a number followed by an HTTP reason phrase, are
no values now. The rest of this table (technical prose about passwords, codes and keys, and the
sentences the cues of helper-169 must not take) came through as written before and must still.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import check_sent_as_written, check_left_alone, check_replaced_alone
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: Taken for secrets before (e534289's bare "password", 0ea731f's bare "security code").
IDENTIFIERS = [
    "password field2",
    "Focus the password input1 box.",
    "security code 200 OK",
    "The API answered security code 403 Forbidden.",
]

#: Ordinary sentences: technical prose and chat about passwords, codes and keys.
ORDINARY = [
    "the password field is required",
    "reset your password",
    "the code is clean",
    "verification code was sent to your phone",
    "the key is to stay calm",
    "the key point is",
    "The password is hashed with bcrypt.",
    "The password is never logged.",
    "Passwords must be at least 12 characters.",
    "The password hashing algorithm is Argon2id.",
    "password_length = 16",
    "the password prompt appears",
    "the password input field is focused",
    "Reset password is done.",
    "the password is stored in the vault",
    "Type the password twice.",
    "The password is whatever you set.",
    "The password is below.",
    "The password is attached.",
    "The password is here.",
    "our pw policy is strict",
    "pw reset link expired",
    "the password manager is open",
    "The code is ready for review.",
    "the code is fine",
    "Enter the 6-digit verification code.",
    "OTP codes are six digits.",
    "Use an OTP app.",
    "The 2FA code was rejected.",
    "error code 1234",
    "exit code 127",
    "primary key column",
    "key points: security, speed",
    "network settings, key management",
    "the network is down, key services affected",
    "wifi is slow, key question is why",
    "The wifi key is printed on the router.",
    "the wifi key is on the sticker",
    "backup codes are 8 digits",
    "Your recovery code expires tomorrow.",
    "The access code policy changed in 2024.",
]


async def test_identifiers_after_the_word_reach_the_observer_as_written() -> None:
    await check_sent_as_written(IDENTIFIERS)


async def test_ordinary_prose_reaches_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize("text", IDENTIFIERS + ORDINARY)
def test_left_alone(text: str) -> None:
    check_left_alone(text)


#: Passwords made of a word and a number are still passwords (controls: redacted before too).
PASSWORDS = [("netflix pw test123", "test123"), ("gmail password user2024", "user2024"), ("CVV 200", "200")]


@pytest.mark.parametrize(("text", "secret"), PASSWORDS)
def test_passwords_like_identifiers_are_still_replaced(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


#: Near misses of helper-169's detectors, repeated: redaction's work stays linear in the text.
ADVERSARIAL = [
    "the a b password is ", "password's ", ". password ", "\n> password is ", "verification code ",
    "2FA code 1", "1234 is your a b ", "G-1234 is ", "network a, key ", "ssid " + "x" * 70 + " ", "wifi key ",
    "security code 200 ", "password field2 ", "my password is " + "a" * 70 + " ",
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_near_misses(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND
