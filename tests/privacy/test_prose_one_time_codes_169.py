"""A one-time code said with no copula never reaches the memory models (helper-169).

Before: with privacy on, "verification code 123456", "2FA code 551203", "OTP 739201 expires in 5
min", "sms code 4821" (the code word right before its digits) and the text message that brings one
("482913 is your verification code", "G-730514 is your Google verification code.") reached the
hosted observer in clear and stayed in the observations it wrote, while "your one-time code is
482913" and "OTP: 739201" were already redacted. Ordinary sentences about codes ("verification code
was sent to your phone", "Erlang/OTP 26", "the login code 2024 update", "status code 200 OK") are
left as written.
"""

from __future__ import annotations

import pytest

from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("verification code 123456", "123456"),
    ("2FA code 551203", "551203"),
    ("OTP 739201 expires in 5 min", "739201"),
    ("my sms code 4821, quick", "4821"),
    ("One-time code 604-117", "604-117"),
    ("login code 90817263", "90817263"),
    ("482913 is your verification code", "482913"),
    ("G-730514 is your Google verification code.", "730514"),
    # the forms with a copula or a colon, redacted before too: kept so
    ("your one-time code is 318406", "318406"),
    ("OTP: 275019", "275019"),
]

#: Ordinary sentences about codes: left as written.
ORDINARY = [
    "verification code was sent to your phone",
    "The verification code expires in 10 minutes.",
    "Enter the 6-digit verification code.",
    "OTP codes are six digits.",
    "Erlang/OTP 26 is required.",
    "We send the 2FA code 2 times at most.",
    "The login code 2024 update changed nothing.",
    "status code 200 OK",
    "HTTP status code 404 means not found.",
    "exit code 127",
]


async def test_one_time_codes_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


async def test_ordinary_sentences_about_codes_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_code_alone_is_replaced(text: str, secret: str) -> None:
    before = "G-" if text.startswith("G-") else None
    check_replaced_alone(text, secret, counts={"password": 1}, before=before)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)
