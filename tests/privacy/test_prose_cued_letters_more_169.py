"""A letters-only password said the other common ways never reaches the memory models (helper-169).

Before: with privacy on, each of these reached the hosted observer in clear and stayed in the
observations it wrote:

* "the password is tulipsun" (no word between "the" and "password": only "my/our/…" or "the wifi
  password is …" counted), and a sentence that starts with the word ("Password is kiwi.");
* "my password's tulipsun" (the contraction: only "is"/"was"/":" were read);
* a password of four or five letters after such a cue ("my password is kiwi", "pw: mango");
* a word that ends like a describing word ("my password is butterfly": "-ly"; "chocolate": "-ate").

Sentences that describe a password ("the password is weak", "the password's strength", "my
password is lovely", "the password is bcrypt") stay as written.
"""

from __future__ import annotations

import pytest

from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone

pytestmark = pytest.mark.anyio

#: gap 1: "the password is …" with no word naming whose, and a sentence starting with the word
THE_PASSWORD = [
    ("the password is tulipsun", "tulipsun"),
    ("The password is frostpine.", "frostpine"),
    ("Password is bluemoonx.", "bluemoonx"),
    ("ok. password is sunpetals, don't share it", "sunpetals"),
    # in capitals, redacted before too (eight letters or more in capitals): kept so
    ("THE PASSWORD IS HOLLYOAK", "HOLLYOAK"),
]
#: gap 2: the contraction
CONTRACTED = [
    ("my password's quillrose", "quillrose"),
    ("My wifi password\u2019s Ambergrove.", "Ambergrove"),
    ("the password's marigolds", "marigolds"),
]
#: gap 4: four or five letters after a clear cue
SHORT = [
    ("password is kiwi", "kiwi"),
    ("my password is mango", "mango"),
    ("the wifi password is lemur", "lemur"),
    ("pw: yeti", "yeti"),
    ("Our netflix password was okapi.", "okapi"),
]
#: gap 5: a word that ends like a describing word
DESCRIBING_END = [
    ("my password is butterfly", "butterfly"),
    ("the wifi password is dragonfly", "dragonfly"),
    ("My password is chocolate.", "chocolate"),
    ("our password is elephant", "elephant"),
    ("his password is treasure", "treasure"),
]
SAID = THE_PASSWORD + CONTRACTED + SHORT + DESCRIBING_END

#: Sentences that describe a password with the same cues: left as written.
ORDINARY = [
    "The password is weak.",
    "the password is fake",
    "The password is also.",
    "the password is sent",
    "the password is valid",
    "The password is plain.",
    "The password is bcrypt.",
    "Password is required.",
    "Password is too short.",
    "password is empty",
    "I don't know what the password is.",
    "Check the password's strength.",
    "store the password's hash.",
    "the password's length.",
    "my password's expiry",
    "I keep forgetting my password's capitalisation.",
    "my password is lovely",
    "my password is ugly",
    "my password is expiring",
    "The password is unbreakable.",
    "The password is either correct or not.",
    "the password is there",
    "The password is then hashed.",
]


async def test_the_password_is_never_reaches_the_observer_or_the_observations() -> None:
    await check_never_sent(THE_PASSWORD)


async def test_a_contracted_password_never_reaches_the_observer_or_the_observations() -> None:
    await check_never_sent(CONTRACTED)


async def test_a_short_password_after_a_cue_never_reaches_the_observer_or_the_observations() -> None:
    await check_never_sent(SHORT)


async def test_a_password_ending_like_a_describing_word_never_reaches_the_observer_or_the_observations() -> None:
    await check_never_sent(DESCRIBING_END)


async def test_sentences_that_describe_a_password_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_password_alone_is_replaced(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_describing_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)
