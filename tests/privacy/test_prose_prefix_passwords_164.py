"""A password said in prose that starts like an algorithm's or a standard's name ("q1w2e3r4",
"h4ck3rman", "k9lover22", "base64rocks", "md5sucks1") never reaches the memory models
(helper-164).

Before: every prose detector refused a value made of one of the names of algorithms, standards
and platforms ("aes", "sha", "md", "base", "rot", "des", "x", "q", "h", "k", ...) then a digit,
whatever followed: "my password is q1w2e3r4", one of the commonest passwords there is, reached
the hosted observer in clear and stayed in its observations ("password: q1w2e3r4" was redacted).
Such a name is now one only when what follows its number is a short ending or starts with a
separator ("sha256", "sha256sum", "aes-256-gcm", "x86_64", "argon2id", "gpt4o", "x509v3",
"q4_k_m", "k8s"): those stay as written after a password word.
"""

from __future__ import annotations

import pytest


from .hosted_observer import check_never_sent, check_replaced_alone, check_left_alone

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("my password is q1w2e3r4", "q1w2e3r4"),
    ("My wifi password is h4ck3rman.", "h4ck3rman"),
    ("our netflix pw is k9lover22", "k9lover22"),
    ("gmail password base64rocks", "base64rocks"),
    ("his password was md5sucks1", "md5sucks1"),
    ("my pw is x1y2z3w4", "x1y2z3w4"),
    # redacted before too: kept so
    ("password: q1w2e3r4", "q1w2e3r4"),
]

#: The names of algorithms, standards and platforms after a password word: left as written.
ORDINARY = [
    "hash the password sha256 first",
    "the password sha256sum check",
    "encrypt the password aes-256-gcm style",
    "my password is x86_64 only",
    "store the password argon2id hashed",
    "the password x509v3 certificate",
    "the password utf-8 encoded",
    "password h264",
    "password k8s secret",
    "the pw is q4_k_m",
    "password gpt4o prompt",
    "password pbkdf2-sha256 rounds",
    "password tls1.3 only",
]


async def test_these_passwords_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_password_alone_is_replaced(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_names_of_algorithms_are_left_alone(text: str) -> None:
    check_left_alone(text)
