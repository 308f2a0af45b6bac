"""What the resource-scope delete tests share: a memory whose threads share a resource with
sharing on, a conversation of one thread (``talk``), and ``pair``: two Memory objects over one
store (one app's two tasks for memory://), each test param a store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig

SHARED = MemoryConfig(
    scope="resource", share_threads_in_resource=True, observation=ObservationConfig(message_tokens=200)
)


async def talk(memory: Memory, thread_id: str, turns: int, topic: str) -> None:
    """``turns`` turns of ``thread_id`` (resource ``u``) about ``topic``, a user message and a reply each."""
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id="u",
            messages=[Message.user(f"About my {topic}: note {i}, the {topic} plan number {i * 17} matters to me.")],
        )
        await turn.step([Message.assistant(f"Noted {topic} {i}.")])
        await turn.end()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Memory, Memory]]:
    if request.param == "memory":  # one app: two tasks
        async with Memory("memory://", config=SHARED, max_turn_wait=None) as memory:
            yield memory, memory
        return
    url = f"sqlite:///{tmp_path}/m.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    async with (
        Memory(url, config=SHARED, max_turn_wait=None) as first,
        Memory(url, config=SHARED, max_turn_wait=None) as second,
    ):
        yield first, second
