"""The privacy boundary reads secrets said in prose (obsmem.said), with the same table as
knowledge capture (tests/knowledge/agents/test_capture_drops_secrets_129.py): every stated
secret is replaced before a hosted model sees it, and the ordinary sentences (dates, versions,
prices, order numbers, a password *manager*, a password *reset*) pass untouched: redaction that
destroyed them would cost every privacy user the observations they make.
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor
from tests.knowledge.agents.test_capture_drops_secrets_129 import DISGUISED, ORDINARY, SECRETS

#: Rows capture finds by more than redaction reads: look-alike letters (capture folds them) and a
#: payment card (capture counts it a secret; for redaction it is opt-in PII, ``credit_card``).
CAPTURE_ONLY = {"My wifi p\u0430ssw\u043erd is hunter2-Blue!", "My card number is 4111 1111 1111 1111."}


def _redactor() -> Redactor:
    return Redactor(b"k" * 32)


@pytest.mark.parametrize(
    ("text", "secret"), [row for row in SECRETS + DISGUISED if row[0] not in CAPTURE_ONLY],
    ids=[text[:32] for text, _ in SECRETS + DISGUISED if text not in CAPTURE_ONLY],
)
def test_a_secret_said_in_prose_is_redacted(text: str, secret: str) -> None:
    redacted = _redactor().redact(text)
    assert secret not in redacted.text
    assert "[REDACTED:" in redacted.text


@pytest.mark.parametrize(("text", "_captured"), ORDINARY, ids=[text[:24] for text, _ in ORDINARY])
def test_ordinary_prose_is_left_as_it_is(text: str, _captured: str) -> None:
    assert _redactor().redact(text).text == text


def test_the_rest_of_the_sentence_stays() -> None:
    redacted = _redactor().redact("My wifi password is hunter2-Blue! The router is in the hallway.").text
    assert redacted.startswith("My wifi password is [REDACTED:password:")
    assert redacted.endswith("! The router is in the hallway.")
