"""Times, years and cloud regions are no secrets (helper-152, reviewing f1e0704 and 81c2cd9).

f1e0704 took a number of four digits after "doors open", "gates open", "gets in" for a door code
(the word "with" was optional), so with privacy on an event's times reached the hosted observer
as placeholders: "Doors open 1930", "The flight gets in 1430 tomorrow", "We hope to get in 2025".
81c2cd9 took what follows "account is X /" for a password: "The AWS account is prod / us-east-1"
lost its region. The codes those commits meant ("The gate opens with 2741", "WiFi: HomeNet /
Magnolia5q") are still redacted.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio

ORDINARY = [
    "Doors open 1930, show starts 2000.",
    "Gates open 1100 on Saturday.",
    "The flight gets in 1430 tomorrow.",
    "We hope to get in 2025.",
    "The AWS account is prod / us-east-1.",
    "account: 123456789012 / eu-west-2",
    "The GCP account is analytics / europe-west4.",
]

SECRETS = [
    ("The gate opens with 2741.", "2741"),
    ("You get in with code 3852", "3852"),
    ("WiFi: HomeNet / Magnolia5q", "Magnolia5q"),
    ("my login is alice / Hibiscus6w", "Hibiscus6w"),
]


def _config() -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))


async def _sent(text: str) -> str:
    """What the hosted observer was sent for a user message ``text``."""
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User talked.\n</observations>"

    async with Memory("memory://", config=_config(), observer=FunctionModel(observer, name="openai:x")) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 40)])
        await memory.observe("t1")
    assert seen, "observed"
    return "\n".join(seen).replace("\n> ", "\n")


@pytest.mark.parametrize("line", ORDINARY)
async def test_times_and_regions_reach_the_observer_as_written(line: str) -> None:
    sent = await _sent(line + "\n\n" + "word " * 40)
    assert line in sent
    assert "[REDACTED" not in sent


async def test_the_codes_are_still_redacted() -> None:
    sent = await _sent("\n\n".join(said for said, _ in SECRETS) + "\n\n" + "word " * 40)
    assert [secret for _, secret in SECRETS if secret in sent] == []
