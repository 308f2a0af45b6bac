"""Builders for the retrieval tests: real SQLite stores, the offline models, dated conversations."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig, RetrievalConfig
from obsmem.clock import FakeClock
from obsmem.om.text.groups import ObservationGroup, parse_groups
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.om.selection import observable_messages
from obsmem.types import TextPart

START = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)

TOPICS = [
    (
        "I moved to Lisbon last spring and rent a flat in Alfama.",
        "Alfama is lovely; the trams there are steep.",
    ),
    ("My sister Ines is a cardiologist in Porto.", "Cardiology in Porto has a strong university hospital."),
    (
        "Our team deploys the billing service with Terraform 1.7.",
        "Terraform 1.7 added removed blocks for refactors.",
    ),
    (
        "I'm training for the Berlin marathon in September.",
        "A 16-week plan with one long run a week works well.",
    ),
    (
        "The staging database password rotates every 30 days.",
        "Rotation every 30 days matches your security policy.",
    ),
    ("My cat Pixel only eats salmon pate.", "Salmon pate is a common preference for fussy cats."),
    ("We ship the mobile app every second Thursday.", "A biweekly Thursday release gives QA a full week."),
    ("I keep my notes in Obsidian with a daily template.", "Daily templates in Obsidian help with reviews."),
]


def retrieval_config(
    *, message_tokens: int = 300, observation_tokens: int = 100_000, **retrieval: Any
) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=observation_tokens),
        retrieval=RetrievalConfig(enabled=True, **retrieval),
    )


class RecordingObserver:
    """The real offline observer, remembering which messages each cycle was given."""

    def __init__(self, inner: OfflineObserver) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[list[str]] = []

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.calls.append([m.id for m in request.messages])
        return await self.inner.observe(request)


def dated_messages(count: int, prefix: str = "", *, step: timedelta = timedelta(hours=1)) -> list[Message]:
    """``count`` alternating user/assistant messages, an hour apart (so they span many days)."""
    out: list[Message] = []
    at = START
    for i in range(count):
        user_text, reply = TOPICS[(i // 2) % len(TOPICS)]
        turn = i // 2
        if i % 2 == 0:
            text = f"{user_text} By the way, item {turn}: remember the code {prefix}K{turn:04d}."
            role = "user"
        else:
            text = f"{reply} Noted item {turn} with code {prefix}K{turn:04d}."
            role = "assistant"
        out.append(Message(id=f"{prefix}m{i:04d}", role=role, parts=(TextPart(text=text),), created_at=at))
        at += step
    return out


async def replay(memory: Memory, thread_id: str, resource_id: str, messages: Sequence[Message]) -> None:
    """Drive the turn API: one turn per user message, the reply as its step."""
    for index in range(0, len(messages), 2):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id=resource_id, messages=[messages[index]]
        )
        if index + 1 < len(messages):
            await turn.step([messages[index + 1]])
        await turn.end()


def groups_of(text: str) -> list[ObservationGroup]:
    return parse_groups(text)


async def covered_ids(memory: Memory, group: ObservationGroup) -> list[str]:
    """The ids the store holds in the group's seq span (conversation messages only), in order."""
    stored = await memory.store.list_messages(
        group.thread_id, after_seq=group.first_seq - 1, before_seq=group.last_seq + 1
    )
    return [m.id for m in observable_messages(stored)]


async def recall_all(memory: Memory, thread_id: str, **kwargs: Any) -> list[str]:
    """Every message id a paged recall returns, following pages and truncation to the end."""
    ids: list[str] = []
    page = 1
    while True:
        result = await memory.recall(thread_id, page=page, token_budget=100_000, **kwargs)
        assert not result.truncated
        ids.extend(result.message_ids)
        if not result.has_next_page:
            return ids
        page += 1


def memory_for(path: Path, config: MemoryConfig, **kwargs: Any) -> Memory:
    return Memory(f"sqlite:///{path}", config=config, clock=FakeClock(START), **kwargs)
