"""An observation or reflection in flight for a thread deleted mid-call never commits, in thread
and resource scope; deleting a thread in resource scope also removes its text from older
generations and from the other threads' observation markers."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.errors import ObsmemError
from obsmem.models.base import ModelRequest
from obsmem.models.testing import FunctionModel
from obsmem.om.sections import split_sections
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.types import Message

from .scan import scan

pytestmark = pytest.mark.anyio

SECRET = "QZXINFLIGHT77"


def config(scope: Literal["thread", "resource"]) -> MemoryConfig:
    return MemoryConfig(
        scope=scope,
        observation=ObservationConfig(message_tokens=30, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )


def gated_observer(entered: asyncio.Event, release: asyncio.Event) -> FunctionModel:
    async def observe(messages: list[Message], settings: ModelRequest | None) -> str:
        entered.set()
        await release.wait()
        return f"<observations>\n* 🔴 (09:00) User said the codename is {SECRET}.\n</observations>"

    return FunctionModel(observe)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: object) -> Store:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "race.db")


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_an_observation_for_a_thread_deleted_mid_call_never_commits(
    store: Store, scope: Literal["thread", "resource"]
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    memory = Memory(store, config=config(scope), observer=gated_observer(entered, release), max_turn_wait=None)
    await memory.create_thread("other", "u1")
    await memory.create_thread("t1", "u1")
    text = "I am planning the migration of every table to the new cluster, one step at a time, today."

    await memory.save_messages("t1", [Message.user(text), Message.assistant(text)])

    async def observe() -> None:
        with contextlib.suppress(ObsmemError):
            await memory.observe("t1")

    task = asyncio.create_task(observe())
    await entered.wait()  # the observer model is called and held
    assert await memory.delete_thread("t1")
    release.set()
    await task
    await memory.settled()

    assert scan(store, SECRET) == []
    assert scan(store, "migration of every table") == []
    head = await store.get_head("resource:u1" if scope == "resource" else "thread:t1")
    assert head is None or "t1" not in head.active_observations
    await memory.aclose()
    await store.close()


async def test_delete_thread_in_resource_scope_removes_its_text_from_older_generations_and_markers(
    store: Store,
) -> None:
    memory = Memory(
        store,
        config=MemoryConfig(
            scope="resource",
            observation=ObservationConfig(message_tokens=60, buffer_tokens=False),
            reflection=ReflectionConfig(observation_tokens=80),
        ),
        max_turn_wait=None,
    )
    for i in range(6):
        for thread_id, word in (("t1", SECRET), ("t2", "Bluebird")):
            text = f"My project codename is {word} and I need step {i} of the migration plan for table t{i} today."
            turn = await memory.begin_turn(thread_id=thread_id, resource_id="u1", messages=[Message.user(text)])
            await turn.end()
        await memory.observe("t1")
        await memory.observe("t2")
        if i % 2:
            await memory.reflect("t2")
    await memory.settled()
    generations = await memory.list_generations("t2")
    assert len(generations) >= 2 and any(SECRET in g.active_observations for g in generations)
    assert scan(store, SECRET)

    await memory.delete_thread("t1")

    assert scan(store, SECRET) == []
    # The other thread's sections stay, in the live record and the older generations.
    generations = await memory.list_generations("t2")
    kept = [g for g in generations if any(t == "t2" for t, _ in split_sections(g.active_observations))]
    assert len(kept) >= 2
    await memory.aclose()
    await store.close()
