"""The short letters-only passwords of 00e24bd, said in the other ways people say them, never reach
the memory models (helper-164).

Before: with privacy on, "MY PASSWORD IS TULIPSUN" (a sentence in capitals: the "is" was matched
in lower case only, so "my password is tulipsun" was redacted and the same sentence shouted was
not), "My Password Is Bluemoon" and "the wifi password is tulipsun" / "the new netflix password
is bluemoon" (the password of a named thing, the commonest way to share a wifi password) reached
the hosted observer in clear; and "my password is plaintext", "your password is similar",
"the password is upstairs" style sentences, which describe a password, were redacted as if the
word were one. Now the copula is matched in any case, "the" followed by a word or two names a
password as "my" does, and those describing words stay as written. "The password is
unbreakable." (no word between "the" and "password") keeps the older, stricter rules.
"""

from __future__ import annotations

import pytest


from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("MY PASSWORD IS TULIPSUN", "TULIPSUN"),
    ("MY PW IS FROSTPINE!", "FROSTPINE"),
    ("My Password Is Bluemoon", "Bluemoon"),
    ("my password WAS hollyoak", "hollyoak"),
    ("the wifi password is tulipsun", "tulipsun"),
    ("The new netflix password is bluemoon.", "bluemoon"),
    ("the guest wifi password is still qwertyzx", "qwertyzx"),
    ("THE WIFI PASSWORD IS SUNPETAL", "SUNPETAL"),
    # redacted before too: kept so
    ("my password is tulipsun", "tulipsun"),
    ("our netflix password is bluemoon, don't tell", "bluemoon"),
]

#: Sentences that describe a password: left as written.
ORDINARY = [
    "The password is unbreakable.",
    "the password is long enough",
    "THE PASSWORD IS WRONG",
    "My Password Is Obsolete",
    "MY PASSWORD IS EXPIRED",
    "my password is plaintext",
    "Your password is similar.",
    "the wifi password is upstairs",
    "the wifi password is printed on the router",
    "the new password is required",
    "The admin password is hardcoded.",
    "the old password is invalid",
    "the default password is blank",
    "the current password is incorrect",
    "The same password is everywhere.",
    "the wifi password is downstairs",
    "the database password is cleartext",
    "the reset password is tomorrow",
    "the master password is forgotten",
    "Check the password strength.",
]


async def test_these_passwords_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


async def test_sentences_that_describe_a_password_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_password_alone_is_replaced(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_describing_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)
