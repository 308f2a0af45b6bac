"""A knowledge item for a reflection (curate and learn after capture) that fails goes back to the
queue still asking for the reflection phase, even when a plain capture item for the same thread
was queued while it ran (the application committed an observation meanwhile): the two coalesce,
and before, the waiting capture's payload won, so curate and learn never ran for that reflection."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.clock import SystemClock
from obsmem.knowledge import InMemoryKnowledgeStore, Knowledge
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore
from obsmem.worker import Worker

pytestmark = pytest.mark.anyio


class DownWhileQueued(InMemoryKnowledgeStore):
    """A knowledge store that is down; its first failing call lets the application queue a capture
    for the same thread first, as an observation committed meanwhile does."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.main_store = store
        self.queued = False

    def __getattribute__(self, name: str) -> Any:
        attr = object.__getattribute__(self, name)
        if name.startswith("_") or not asyncio.iscoroutinefunction(attr):
            return attr

        async def down(*args: object, **kwargs: object) -> object:
            if not self.queued:
                self.queued = True
                await self.main_store.enqueue_work("knowledge", "t1", now=SystemClock().now())
            raise RuntimeError(f"knowledge store down ({name})")

        return down


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "k.db")
    return PostgresStore(request.getfixturevalue("postgres_url"))


async def test_a_failed_reflection_item_still_asks_for_the_reflection_phase(any_store: Store) -> None:
    config = MemoryConfig(observation={"message_tokens": 200, "buffer_tokens": 0.25},
                          reflection={"observation_tokens": 100_000})
    async with any_store as store:
        async with Memory(store, config=config) as memory:
            turn = await memory.begin_turn(thread_id="t1", resource_id="alice",
                                           messages=[Message.user("I work at Tessera Logistics in Munich.")])
            await turn.end([Message.assistant("Noted.")])
            await memory.observe("t1")
        await store.enqueue_work("knowledge", "t1", now=SystemClock().now(), payload={"reflection": True})
        graph = DownWhileQueued(store)
        worker = Worker(store, config=config, knowledge=Knowledge(graph), poll_interval_s=0.01, kinds=("knowledge",))
        await worker.run(max_items=1)
        assert graph.queued and worker.stats.released == 1
        queued = await store.list_work("knowledge")
        assert [item.payload for item in queued] == [{"reflection": True}]
