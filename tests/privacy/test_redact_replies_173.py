"""A password or a code given as the whole reply to the assistant's question about it never reaches
the memory models (helper-173).

Before: with privacy on, the assistant asking "What is the wifi password?" and the user answering
"tulipsun" in the next message sent "User: tulipsun" to the hosted observer in clear (the reply
alone names no password), and the observations it wrote kept it. The memory models read the
transcript, where the question and the reply stand one blank line apart: a reply that is one word
(or "it's" and one word) right after a question ending in a password, PIN or door-code word is
replaced. One-word replies that are no password ("Yes", "Maybe", "Nope") and replies to a question
about a program's code ("Python", "1200") are left as written.
"""

from __future__ import annotations


import pytest

from obsmem import Memory, Message
from obsmem.privacy import Redactor

from .hosted_observer import echoing, privacy_config
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (the assistant's question, the user's whole reply, the secret in it)
REPLIED = [
    ("Sure, what is the wifi password?", "tulipsun", "tulipsun"),
    ("What's the password for the router?", "Orchid55k", "Orchid55k"),
    ("OK. And the password?", "it's bluemoon", "bluemoon"),
    ("What's the door code?", "4821#", "4821#"),
    ("Got it. And the PIN for the card?", "7305", "7305"),
]

#: (the assistant's question, the user's reply): left as written.
ORDINARY = [
    ("Did you change your password?", "Yes"),
    ("Shall I reset the password?", "Please"),
    ("Do you remember the old password?", "Nope"),
    ("Is that the wifi password?", "Maybe"),
    ("Which language should I write the code in?", "Python"),
    ("How many lines is the code?", "1200"),
    ("Do you use a PIN?", "Sometimes"),
    ("When did you last change the password?", "Yesterday"),
]


async def conversation(exchanges: list[tuple[str, str]]) -> tuple[str, str]:
    """What the hosted observer was sent for a thread where the assistant asks each question and
    the user's next message is the reply, and the observations kept."""
    seen: list[str] = []
    async with Memory("memory://", config=privacy_config(), observer=echoing(seen)) as memory:
        user = "I need some help " + "please " * 10
        for question, reply in exchanges:
            turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(user)])
            await turn.end([Message.assistant(question)])
            user = reply
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(user)])
        await turn.end([Message.assistant("Noted " + "ok " * 40)])
        await memory.observe("t1")
        kept = await memory.get_observations("t1")
    return "\n".join(seen), kept


@pytest.mark.parametrize(("question", "reply", "secret"), REPLIED)
async def test_a_reply_that_is_the_secret_never_reaches_the_observer(question: str, reply: str, secret: str) -> None:
    sent, kept = await conversation([(question, reply)])
    assert question in sent and "User said" in kept
    assert secret not in sent
    assert secret not in kept


async def test_ordinary_replies_reach_the_observer_as_written() -> None:
    sent, _ = await conversation(ORDINARY)
    assert [reply for _, reply in ORDINARY if f": {reply}\n" not in sent] == []
    assert "[REDACTED" not in sent


#: Near misses of the reply detectors, repeated: redaction's work stays linear in the text.
ADVERSARIAL = [
    "password?\n\nUser: ", "password for a b c d?\n\nUser (10:00 AM): x y\n", "door code?\n\n", "PIN?\n\nUser: it's ",
    "password?\n\nJun 15 2025:\nUser: a" + "b" * 70 + "\n\n",
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_near_misses(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND
