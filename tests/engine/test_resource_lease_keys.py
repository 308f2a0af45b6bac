"""Resource scope: one thread's observation lease is told apart from another resource's.

A synchronous observation in resource scope holds a lease per thread. Its key joined the
resource and the thread with ':', so resource ``a`` with thread ``b:c`` and resource ``a:b``
with thread ``c`` had the same key: deleting the first released the second's lease while its
observation ran, and the status (and every other holder) saw no observation in flight.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("running", "deleted"),
    [(("a:b", "c"), ("a", "b:c")), (("a", "b:c"), ("a:b", "c")), (("x", "y%3Az"), ("x", "y:z"))],
)
async def test_deleting_a_resource_keeps_the_observation_lease_of_a_thread_whose_key_looked_alike(
    tmp_path: Path, running: tuple[str, str], deleted: tuple[str, str]
) -> None:
    started, gate = asyncio.Event(), asyncio.Event()

    class GatedObserver(OfflineObserver):
        async def observe(self, request: ObservationRequest) -> ObservationResult:
            started.set()
            await gate.wait()
            return await super().observe(request)

    config = MemoryConfig(
        scope="resource",
        observation=ObservationConfig(message_tokens=200, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    resource, thread = running
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}", config=config, observer=GatedObserver()) as memory:
        await memory.create_thread(thread, resource)
        await memory.save_messages(thread, [Message.user("I live in Munich and walk by the Isar. " * 30)])
        observing = asyncio.create_task(memory.observe(thread))
        await asyncio.wait_for(started.wait(), 10)
        assert "sync-observation" in (await memory.status(thread)).in_flight
        other_resource, other_thread = deleted
        if other_resource != resource:
            await memory.create_thread(other_thread, other_resource)
            await memory.delete_resource(other_resource)
        else:
            await memory.create_thread(other_thread, other_resource)
            await memory.delete_thread(other_thread)
        assert "sync-observation" in (await memory.status(thread)).in_flight, "the running observation lost its lease"
        gate.set()
        await observing
        assert "Munich" in (await memory.get_record(thread)).active_observations
