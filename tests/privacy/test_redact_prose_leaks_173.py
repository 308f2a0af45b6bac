"""Secrets said in chat the ways users say them never reach the memory models (helper-173).

Before: with privacy on, these reached the hosted observer in clear and stayed in the observations
it wrote: a key said with "the key is" ("The key is Tulip77x", "my api key is Tulip77xQ9"), a
password given after a question about it ("what is the password? it is tulipsun"), a one-time code
after "code" ("Your code: 482913", "Use code 482913 to sign in"), a password of three letters ("my
password is abc"), and a few more common forms ("Tulip77x is the wifi password", "I set my
password to tulipsun", "pwd: Tulip77x", "access code: 7731", "api_key=Cedar47nVb", "passcode 7305",
"the app password is wxyz qrst uvwk lmno"). Each secret is replaced, the words
around it kept. "password: fox" and "The password? Tulip77x" were redacted already (controls).
"""

from __future__ import annotations

import pytest

from .hosted_observer import check_never_sent, check_replaced_alone

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it): the leaks named in the task.
KNOWN = [
    ("The key is Tulip77x", "Tulip77x"),
    ("what is the password? it is tulipsun", "tulipsun"),
    ("Your code: 482913", "482913"),
    ("my password is abc", "abc"),
]

#: Keys: an API key, a licence key, a door key, said with a cue word and a copula or a colon.
KEYS = [
    ("my api key is Tulip77xQ9", "Tulip77xQ9"),
    ("API key: Orchid55kWq", "Orchid55kWq"),
    ("the api key is sk12AbCd99", "sk12AbCd99"),
    ("secret key is Hibiscus6w2", "Hibiscus6w2"),
    ("the license key is ABCD-1234-EFGH-5678", "ABCD-1234-EFGH-5678"),
    ("The door key is Maple42kz.", "Maple42kz"),
    ("my key is Quartz81v, don't share it", "Quartz81v"),
    ("api key Sunfl0wer42Xy", "Sunfl0wer42Xy"),
    ("my API key is: Larch19qPz", "Larch19qPz"),
    ("The key's Tulip77x", "Tulip77x"),
    ("here is the key: Birch23kk", "Birch23kk"),
]

#: One-time codes after "code" with no code word before it ("verification code …" was redacted before).
CODES = [
    ("Use code 318406 to sign in", "318406"),
    ("Enter code 551203 to continue.", "551203"),
    ("your code 739201 expires in 10 minutes", "739201"),
    ("Your code is 604117.", "604117"),
    ("Code: 90817263", "90817263"),
    ("access code: 7731", "7731"),
    ("login code is 2719", "2719"),
    ("Your Uber code: 5093", "5093"),
    ("Enter this code: 662190", "662190"),
]

#: A password, PIN or code given right after a question about it.
ASKED = [
    ("what's the wifi password? it's bluemoon", "bluemoon"),
    ("What is the password? It is Orchid55k.", "Orchid55k"),
    ("what is the PIN? it is 4821", "4821"),
    ("What's the door code? It's 3952.", "3952"),
    ("what was the passcode? it was 6620", "6620"),
    ("What is the wifi key? It's Sunfl0wer42", "Sunfl0wer42"),
    ("what's the garage code? it's 1357#", "1357#"),
]

#: A password of three letters after a cue.
THREE_LETTERS = [
    ("the password is owl.", "owl"),
    ('my password is "elk"', "elk"),
    ("pw: yak", "yak"),
    ("My wifi password is emu and the guest one too", "emu"),
    # redacted before too (the assignment form): a control
    ("password: fox", "fox"),
]

#: More of the common ways.
OTHER = [
    ("Tulip77x is the wifi password", "Tulip77x"),
    ("Bluebird88 is the password.", "Bluebird88"),
    ("I set my password to tulipsun", "tulipsun"),
    ("I changed my password to quillrose.", "quillrose"),
    ("pwd: Tulip77x", "Tulip77x"),
    ("my password for netflix: tulipsun", "tulipsun"),
    # redacted before too: a control
    ("The password? Tulip77x", "Tulip77x"),
]

#: A token or a secret said like a key, a short key assigned in a pasted config, a passcode before
#: its digits, an app password (four groups of four letters).
MORE = [
    ("my token is Hazel83mQx", "Hazel83mQx"),
    ("the secret is Poplar61z", "Poplar61z"),
    ("api_key=Cedar47nVb", "Cedar47nVb"),
    ('"client_secret": "Aspen29rT"', "Aspen29rT"),
    ("passcode 7305", "7305"),
    ("the app password is wxyz qrst uvwk lmno", "wxyz qrst uvwk lmno"),
    ("App password: hjkl-asdf-qwer-zxcv", "hjkl-asdf-qwer-zxcv"),
]

#: A password after a dash, and three letters after the contraction.
DASHED = [
    ("Password - tulipsun", "tulipsun"),
    ("The wifi password \u2013 hollyoak", "hollyoak"),
    ("my password's ibx", "ibx"),
]

#: The values assigned to a key-like name: counted as a secret, the rest as a password.
ASSIGNED = {"Cedar47nVb", "Aspen29rT"}

SAID = KNOWN + KEYS + CODES + ASKED + THREE_LETTERS + OTHER + MORE + DASHED


async def test_known_leaks_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(KNOWN)


async def test_said_secrets_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(KEYS + CODES + ASKED + THREE_LETTERS + OTHER)


async def test_more_said_secrets_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(MORE + DASHED)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_secret_alone_is_replaced(text: str, secret: str) -> None:
    category = "secret" if secret in ASSIGNED else "password"
    check_replaced_alone(text, secret, counts={category: 1})
