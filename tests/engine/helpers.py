"""Builders shared by the engine tests: real stores, the offline or scripted models, a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


def small_config(message_tokens: int = 400, observation_tokens: int = 2000, **observation: Any) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False, **observation),
        reflection=ReflectionConfig(observation_tokens=observation_tokens),
    )


class Conversation:
    """Deterministic messages with increasing timestamps."""

    def __init__(self, start: datetime = START) -> None:
        self.at = start
        self.count = 0

    def _next(self) -> datetime:
        self.at += timedelta(minutes=1)
        self.count += 1
        return self.at

    def user(self, text: str) -> Message:
        return Message(id=f"u{self.count + 1}", role="user", parts=(TextPart(text=text),), created_at=self._next())

    def assistant(self, text: str) -> Message:
        return Message(id=f"a{self.count + 1}", role="assistant", parts=(TextPart(text=text),), created_at=self._next())

    def call(self, call_id: str, tool: str = "get_weather", **args: Any) -> Message:
        return Message(
            id=f"c{self.count + 1}", role="assistant",
            parts=(ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args),), created_at=self._next(),
        )

    def result(self, call_id: str, value: Any, tool: str = "get_weather") -> Message:
        return Message(
            id=f"r{self.count + 1}", role="tool",
            parts=(ToolResultPart(tool_call_id=call_id, tool_name=tool, result=value),), created_at=self._next(),
        )


FACTS = [
    "I live in Munich with my partner Alex.",
    "My daughter Mia is seven years old.",
    "I'm allergic to peanuts.",
    "I work as a data engineer at Helio.",
    "My favourite restaurant is Nopa.",
    "I prefer window seats on flights.",
    "My budget for the trip is 2400 euros.",
    "I drive a blue Volvo.",
]


def chat_turns(n: int) -> Iterator[tuple[str, str]]:
    for i in range(n):
        fact = FACTS[i % len(FACTS)]
        yield (
            f"{fact} Also, question {i}: can you explain how step {i} of the migration plan works in detail?",
            f"Sure. Step {i} moves table t{i} to the new cluster, verifies row counts, and switches reads. "
            f"It usually takes about {10 + i} minutes and can be rolled back by pointing reads back.",
        )


async def replay(memory: Memory, conv: Conversation, turns: int, thread_id: str = "t1") -> None:
    for user_text, reply in chat_turns(turns):
        turn = await memory.begin_turn(thread_id=thread_id, resource_id="u1", messages=[conv.user(user_text)])
        await turn.step([conv.assistant(reply)])
        await turn.end()


def fake_clock() -> FakeClock:
    return FakeClock(START)
