"""A hosted observer (a FunctionModel named like OpenAI's) behind privacy: what it was sent for a
user message, and the observations kept. Shared by the prose-secret tests."""

from __future__ import annotations

from typing import Any

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel


def privacy_config() -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))


async def observed(text: str) -> tuple[str, str]:
    """What the hosted observer was sent for a user message ``text``, and the observations kept."""
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        sent = "\n".join(m.text for m in messages)
        seen.append(sent)
        echoed = " ".join(sent.split())[-3000:]
        return f"<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User said: {echoed}\n</observations>"

    async with Memory("memory://", config=privacy_config(), observer=FunctionModel(observer, name="openai:x")) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 40)])
        await memory.observe("t1")
        kept = await memory.get_observations("t1")
    return "\n".join(seen), kept
