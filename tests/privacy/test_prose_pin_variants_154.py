"""More ways of giving a PIN, a code or a password reach the memory models no longer (helper-154).

Before: with privacy on, "PIN=2741", "door code = 3852", "PIN is: 4963", "alarm code is: 5074",
"my PIN? 6185", "my password? Tulip77x" (README: redacted by neither), "my password is:
correcthorsebattery", and a short form closed by a quote ('She wrote "alarm: 7296" on the
note.') reached the hosted observer in clear, and the observations it wrote kept them. Ordinary
questions and code with the same words are left as written, before and after.
"""

from __future__ import annotations

import pytest

from .hosted_observer import observed as _observed

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
SAID = [
    ("PIN=2741", "2741"),
    ("door code = 3852", "3852"),
    ("PIN is: 4963", "4963"),
    ("alarm code is: 5074", "5074"),
    ("my PIN? 6185", "6185"),
    ("my password? Tulip77x", "Tulip77x"),
    ("my password is: correcthorsebattery", "correcthorsebattery"),
    ('She wrote "alarm: 7296" on the note.', "7296"),
    ("He said 'my password is Snapdragon' twice.", "Snapdragon"),
    # a letters-only password after a label's colon (helper-154's second look)
    ("pw: batterystaplecorrect", "batterystaplecorrect"),
    ("Passcode: Snowdrop", "Snowdrop"),
    ("wifi key: Bluebell", "Bluebell"),
]

#: Ordinary questions and code with the same words: left as written (before and after).
ORDINARY = [
    "Forgot your password? Click here.",
    "What's the PIN? 4 digits.",
    "int pin = 13;",
    "The password is: case-sensitive",
    "The password is Google's.",
    "The password is 'required'",
    "Do you have a pass? Tickets are sold out.",
    "PW: Expired",
    "Passcode: Enabled",
]


@pytest.mark.parametrize(("text", "secret"), SAID, ids=[text[:24] for text, _ in SAID])
async def test_the_variant_never_reaches_the_observer_or_the_observations(text: str, secret: str) -> None:
    sent, kept = await _observed(text + "\n\n" + "word " * 40)
    assert sent and "User said" in kept, "observed"
    assert secret not in sent
    assert secret not in kept


async def test_ordinary_questions_and_code_reach_the_observer_as_written() -> None:
    text = "\n\n".join(ORDINARY) + "\n\n" + "word " * 40
    sent, _ = await _observed(text)
    sent = sent.replace("\n> ", "\n")  # the transcript quotes a message's next lines
    assert [line for line in ORDINARY if line not in sent] == []
    assert "[REDACTED" not in sent
