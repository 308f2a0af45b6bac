"""A password said in prose with an "@" in it ("my password is P@ssw0rd", "netflix pw P@ssw0rd")
never reaches the memory models (helper-164).

Before: with privacy on, every prose password detector refused a value shaped like an e-mail
address (something, "@", something), so the commonest "strong" password of all, a word with
"a" written "@", reached the hosted observer in clear and stayed in its observations, while
"my password is Passw0rd" was redacted. An address needs a dotted domain ("alice@example.com"):
only such a value is still taken for one and left as written.
"""

from __future__ import annotations

import pytest


from .hosted_observer import check_never_sent, check_replaced_alone, check_left_alone

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("my password is P@ssw0rd", "P@ssw0rd"),
    ("pw: P@ssw0rd", "P@ssw0rd"),
    ("netflix pw T@ngo2024x", "T@ngo2024x"),
    ("My wifi password is Sunfl0wer@42.", "Sunfl0wer@42"),
    ("the PIN is 4821 and the password is h@ppyD4ys", "h@ppyD4ys"),
]

#: An address after a password word: left as written (before and after).
ORDINARY = [
    "my password reset mail went to alice@example.com",
    "Send the password to ops@corp.example.org.",
    "password alice@example.com",
    "my login is bob@mail.example.com and my password is wrong",
]


async def test_at_sign_passwords_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_password_alone_is_replaced(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, before=text.split(secret)[0].split("4821")[0])


@pytest.mark.parametrize("text", ORDINARY)
def test_addresses_are_left_alone(text: str) -> None:
    check_left_alone(text)
