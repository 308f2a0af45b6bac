"""A PEM private key pasted in two messages, or cut off, reaches the observer as key material only
in placeholders (helper-126's hostile review).

Chat apps cap a message's length, so a user pastes a key in parts. The observer's transcript
quotes every line of a message after its first with ``> ``, and the private-key scan, which
reads the material after a ``BEGIN`` with no ``END`` (a pasted fragment), stopped at the first
``>``: every body line after the header's reached the hosted model. And the second part (the
rest of the body and the ``END`` line, no ``BEGIN``), observed in a later cycle than the first,
was not recognised at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor

pytestmark = pytest.mark.anyio

LINES = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
    "NMwe5RXvTBMmHvWqGcKmVd3cWxV0cWdLJ3oLZt4sPXs0AYjMmR0Sd4Hp4KQW9mO1",
    "kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9QzXc7VbN2mLk4JhG6fDs8aPo0iUy1tR3",
    "eW5qA7zS9xD2cF4vG6bH8nJ0mK1lP3oI5uY7tR9eW2qA4zS6xD8cF0vG2bH4n==",
]
FIRST = "here is my deploy key, part 1:\n-----BEGIN PRIVATE KEY-----\n" + "\n".join(LINES[:3])
SECOND = "part 2:\n" + "\n".join(LINES[3:]) + "\n-----END PRIVATE KEY-----\nthanks!"


async def test_a_key_pasted_in_two_messages_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User shared a deploy key.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        for text in (FIRST, SECOND):
            turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
            await turn.end([Message.assistant("Got it " + "ok " * 30)])
            await memory.observe("t1")
    assert len(seen) == 2, "each part was observed in its own cycle"
    leaked = [n for n, line in enumerate(LINES) if any(line[:24] in request for request in seen)]
    assert leaked == [], f"key lines {leaked} in clear"
    assert "thanks!" in seen[1] and "part 2:" in seen[1], "the text around the key is kept"


@pytest.mark.parametrize("prefix", ["", "> ", "  "])
def test_the_tail_of_a_key_is_redacted_whatever_its_line_prefix(prefix: str) -> None:
    tail = "\n".join(prefix + line for line in LINES[3:]) + "\n" + prefix + "-----END RSA PRIVATE KEY-----"
    redacted = Redactor(b"k").redact("the rest:\n" + tail + "\nbye").text
    assert redacted.startswith("the rest:\n") and redacted.endswith("\nbye")
    assert all(line[:24] not in redacted for line in LINES), redacted


def test_an_end_line_alone_or_after_prose_takes_no_prose() -> None:
    redactor = Redactor(b"k")
    text = "I saw a line saying\n-----END PRIVATE KEY-----\nin the logs"
    redacted = redactor.redact(text).text
    assert redacted.startswith("I saw a line saying\n") and redacted.endswith("\nin the logs")


def test_many_end_lines_cost_linear_work() -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    unit = LINES[0] + "\n-----END PRIVATE KEY-----\n"
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 20_000)
    assert ratio < GROWTH_BOUND, f"{ratio:.1f}x the work for 4x the input"
    lines = ("A" * 64 + "\n") * 3000 + "-----END PRIVATE KEY-----"
    assert Redactor(b"k").redact(lines).counts == {"private_key": 1}
