"""A card's security code said with no copula never reaches the memory models (helper-162).

Before: with privacy on, "CVV 482", "security code 4821", "CVC2 093" (the code word right before
its digits) reached the hosted observer in clear and the observations it wrote kept them, while
"cvv: 482" and "the CVC is 093" were already redacted. Ordinary sentences with the same words
("the CVV is on the back", "CVV 3 digits", "the security code 2FA app") are left as written.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import check_never_sent, check_sent_as_written, check_replaced_alone, check_left_alone
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("CVV 482", "482"),
    ("my card's cvv 573, expiry 09/27", "573"),
    ("security code 4821", "4821"),
    ("Security code 619 on the back.", "619"),
    ("CVC2 093", "093"),
    ("cvv2 7305", "7305"),
    ("Card verification code 264", "264"),
    ("card security code 3904 thanks", "3904"),
    # the forms with a copula or a colon, redacted before too: kept so
    ("cvv: 815", "815"),
    ("the CVC is 926", "926"),
]

#: Ordinary sentences with the same words: left as written (before and after).
ORDINARY = [
    "The CVV is on the back of the card.",
    "CVV 3 digits, CID 4 digits.",
    "Enter the CVV 2 times if it fails.",
    "The security code 2FA app is on my phone.",
    "Security code 12345678 is too long for a CVV.",
    "Our CVV check failed on 2 of 10 orders.",
    "the code is in the repo",
    "my PIN is the same as before",
    "int pin = 2048;",
    "int cvv_len = 3;",
]


async def test_card_security_codes_never_reach_the_observer_or_the_observations() -> None:
    await check_never_sent(SAID)


async def test_ordinary_sentences_about_card_codes_reach_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize(("text", "secret"), SAID)
def test_the_code_alone_is_replaced_and_redaction_is_idempotent(text: str, secret: str) -> None:
    check_replaced_alone(text, secret, counts={"password": 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_card_sentences_are_left_alone(text: str) -> None:
    check_left_alone(text)


ADVERSARIAL = ["CVV ", "CVV 1", "security code ", "card security code 12345 ", "cvv2 cvc2 ", "CVV 482."]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_card_codes(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND
