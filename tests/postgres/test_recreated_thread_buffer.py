"""A buffered observation in flight while its thread is deleted and a new conversation begins
under the same id must not land in the new conversation's record (delete: gone from every table;
found by helper 203). A worker's buffer of the old conversation (its observation text and the
deleted messages' ids) was appended to the new thread's head: its check compared message
positions only, and the new thread's are all past the old ones. PostgreSQL and SQLite."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage import open_store
from obsmem.tokens import TokenCounter
from obsmem.worker import Worker

pytestmark = pytest.mark.anyio
SECRET = "Zanzibar7731"


def config() -> MemoryConfig:
    return MemoryConfig(observation=ObservationConfig(message_tokens=400, buffer_tokens=0.2),
                        reflection=ReflectionConfig(observation_tokens=40000))


class HeldObserver:
    """Observes offline, holding a call that reads the old conversation until ``go`` is set."""

    name = "held"

    def __init__(self) -> None:
        self.entered, self.go = asyncio.Event(), asyncio.Event()
        self.inner = OfflineObserver(count_tokens=TokenCounter().count_text)

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        result = await self.inner.observe(request)
        if any(SECRET in str(m.parts) for m in request.messages):
            self.entered.set()
            await self.go.wait()
            return ObservationResult(observations=result.observations + f"\n* the user said {SECRET}")
        return result


@pytest.fixture(params=["postgres", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_a_worker_buffer_of_a_deleted_thread_does_not_land_in_its_successor(url: str) -> None:
    observer = HeldObserver()
    async with Memory(url, background="queue", config=config()) as memory:
        for i in range(12):
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                           messages=[Message.user(f"{SECRET} number {i} " + "lorem ipsum " * 8)])
            await turn.end([Message.assistant(f"reply {i}")])
        async with open_store(url) as worker_store:
            worker = Worker(worker_store, config=config(), observer=observer, poll_interval_s=0.05)
            run = asyncio.ensure_future(worker.run(exit_when_idle=True))
            with anyio.fail_after(60):
                await observer.entered.wait()
            assert await memory.delete_thread("t1")
            for i in range(3):  # the user starts over under the same id
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                               messages=[Message.user(f"fresh start {i}")])
                await turn.end([Message.assistant(f"fresh reply {i}")])
            fresh = {m.id for m in await memory.store.list_messages("t1")}
            observer.go.set()
            with anyio.fail_after(60):
                await run
        head = await memory.store.get_head("thread:t1")
        assert head is not None
        assert SECRET not in head.model_dump_json()
        for chunk in head.buffered_chunks:
            assert set(chunk.message_ids) <= fresh
