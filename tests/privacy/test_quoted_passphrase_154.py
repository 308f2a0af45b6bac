"""A quoted passphrase said in prose never reaches the memory models (helper-154).

Before: with privacy on, 'my password is "correct horse battery staple"' and the like reached
the hosted observer in clear and the observations it wrote kept them (README: "Not redacted: …
a quoted multi-word passphrase"). A quoted description is left as written, before and after:
'the password is "not required"', '"case-sensitive"', '"the name of your first pet"' (a hint).
"""

from __future__ import annotations

import pytest

from .hosted_observer import observed as _observed

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ('my password is "correct horse battery staple"', "correct horse battery staple"),
    ("My wifi password is 'purple monkey dishwasher'.", "purple monkey dishwasher"),
    ("The passphrase was \u201clemon tree under snow\u201d.", "lemon tree under snow"),
    ("our wifi key is 'blue-heron-sings-twice'", "blue-heron-sings-twice"),
]

ORDINARY = [
    'the password is "not required"',
    'The password is "case-sensitive".',
    'The password is "expired".',
    'The password is "the name of your first pet".',
    'the password is "very strong and long"',
    'The password is "too short".',
]


@pytest.mark.parametrize(("text", "secret"), SAID, ids=[text[:24] for text, _ in SAID])
async def test_a_quoted_passphrase_never_reaches_the_observer_or_the_observations(text: str, secret: str) -> None:
    sent, kept = await _observed(text + "\n\n" + "word " * 40)
    assert sent and "User said" in kept, "observed"
    assert secret not in sent
    assert secret not in kept


async def test_a_quoted_description_reaches_the_observer_as_written() -> None:
    text = "\n\n".join(ORDINARY) + "\n\n" + "word " * 40
    sent, _ = await _observed(text)
    sent = sent.replace("\n> ", "\n")  # the transcript quotes a message's next lines
    assert [line for line in ORDINARY if line not in sent] == []
    assert "[REDACTED" not in sent
