"""A passphrase of words joined by '-' and ending in digits is a password, not a cloud region
(helper-152). "my password is correct-horse42" must not reach the hosted observer: a rule that
lets "us-east-1" or "europe-west4" through (after "account is prod /") must not let every
lowercase hyphenated word-and-digits password through with it."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio

SAID = [
    ("my password is correct-horse42", "correct-horse42"),
    ("My wifi password is blue-river-42.", "blue-river-42"),
    ("The password for the router is sunny-day7", "sunny-day7"),
    ("pw: tango-mango9", "tango-mango9"),
]


async def test_a_hyphenated_passphrase_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User talked.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        text = "\n\n".join(said for said, _ in SAID) + "\n\n" + "word " * 40
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 40)])
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "word word" in sent, "observed"
    assert [secret for _, secret in SAID if secret in sent] == []
