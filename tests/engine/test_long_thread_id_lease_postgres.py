"""Resource scope on PostgreSQL, a thread whose id is long and non-ASCII (800 CJK characters):
turns that observe it work, as they did before the per-thread observation lease's key held the
id percent-quoted (9 bytes a character): PostgreSQL's key index (about 2,700 bytes a row)
refused the lease, and begin_turn failed with a StorageError."""

from __future__ import annotations

import random

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.om.offline import OfflineObserver, OfflineReflector

from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_turns_observe_a_thread_with_a_long_id_in_resource_scope(postgres_url: str) -> None:  # noqa: F811
    rng = random.Random(7)
    thread_id = "fil-" + "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(800))
    config = MemoryConfig(scope="resource", observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
                          reflection=ReflectionConfig(observation_tokens=200))  # fmt: skip
    async with Memory(postgres_url, config=config, observer=OfflineObserver(), reflector=OfflineReflector()) as memory:
        for i in range(8):
            text = f"Turn {i}: I moved to Berlin in {2000 + i}, my sister Ada lives in Oslo and I keep ferrets. " * 3
            turn = await memory.begin_turn(thread_id=thread_id, resource_id="alice", messages=[Message.user(text)])
            await turn.end([Message.assistant("ok")])
        status = await memory.status(thread_id)
        assert status.generation >= 1  # observed (and reflected)
        assert status.window_tokens < 300
