"""A memory step cancelled by an anyio cancel scope leaves no lease behind.

``Memory.observe`` / ``Memory.reflect`` hold the thread's step lease while the model works. A
web app calls them inside a request, where a timeout (``anyio.move_on_after``, a framework's
deadline) cancels a cancel scope: anyio then cancels every ``await`` inside it, the cleanup's
too. On main (8397ce8) the release was such an ``await``: the lease stayed held for its whole
TTL (60 s), and every turn of the thread in that minute skipped its observation ("held by
another process"), letting the window grow past ``message_tokens`` with nobody observing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio

OBSERVED = "<observations>\n* The user is planning a trip to Oslo in May.\n</observations>"
REFLECTED = "<observations>\n* Trip to Oslo in May.\n</observations>"


def gated(answer: str, gate: asyncio.Event) -> FunctionModel:
    async def model(messages: object, settings: object = None) -> str:
        await gate.wait()
        return answer

    return FunctionModel(model, name=f"test:{answer[15:20]}")


async def held(memory: Memory) -> list[str]:
    return [lease.key for lease in await memory.store.list_leases()]


async def cancelled_while_the_model_works(memory: Memory, call: Callable[[], Awaitable[object]]) -> None:
    """Run ``call`` inside a cancel scope, and cancel the scope once a lease is held."""
    scope = anyio.CancelScope()

    async def within_a_deadline() -> None:  # as anyio.move_on_after runs a request's work
        with scope:
            await call()

    task = asyncio.create_task(within_a_deadline())
    while not await held(memory):
        await asyncio.sleep(0.01)  # the step holds its lease; its model call waits on the gate
    scope.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def settled(memory: Memory) -> list[str]:
    for _ in range(100):  # the release finishes on its own, as its own task
        if not await held(memory):
            break
        await asyncio.sleep(0.01)
    return await held(memory)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_cancelled_observation_leaves_the_thread_observable(tmp_path: Path, backend: str) -> None:
    gate = asyncio.Event()
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'm.db'}"
    config = MemoryConfig(observation=ObservationConfig(message_tokens=60, buffer_tokens=False))
    async with Memory(url, config=config, observer=gated(OBSERVED, gate)) as memory:
        turn = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("Hi there.")])
        await turn.step([Message.assistant("Hello!")])
        await turn.end()
        await cancelled_while_the_model_works(memory, lambda: memory.observe("chat"))
        gate.set()
        assert await settled(memory) == []

        # The next turn past message_tokens observes (with a leftover lease it skipped: "held elsewhere").
        text = "I am planning a trip to Oslo in May and want to see the fjords, the museums and the harbour. " * 3
        turn = await memory.begin_turn(thread_id="chat", messages=[Message.user(text)])
        await turn.step([Message.assistant("Sounds great.")])
        await turn.end()
        await memory.settled()
        record = await memory.get_record("chat")
        assert record is not None and "Oslo" in record.active_observations
        assert [o.reason for o in turn.outcomes if o.operation == "observation" and not o.applied] == []


async def test_a_cancelled_reflection_leaves_no_lease(tmp_path: Path) -> None:
    gate = asyncio.Event()
    observed = asyncio.Event()
    observed.set()
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=60, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=1_000),
    )
    async with Memory(
        f"sqlite:///{tmp_path / 'm.db'}", config=config, observer=gated(OBSERVED, observed),
        reflector=gated(REFLECTED, gate),
    ) as memory:
        turn = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("Hi there.")])
        await turn.step([Message.assistant("Hello!")])
        await turn.end()
        await memory.observe("chat")
        await cancelled_while_the_model_works(memory, lambda: memory.reflect("chat"))
        gate.set()
        assert await settled(memory) == []
        await memory.reflect("chat")  # runs: nothing holds the thread's lease
        record = await memory.get_record("chat")
        assert record is not None and record.generation == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_cancelled_curation_leaves_its_lane_free(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """The knowledge agents' lanes: a curation run cancelled the same way left its lane's lease
    held for its TTL (600 s) where the store's release is a query a cancellation stops
    (PostgreSQL), so every curation of the thread in those ten minutes was "skipped: lane ... is
    being run by another holder"."""
    from obsmem.knowledge import Knowledge
    from obsmem.storage import SQLiteStore
    from obsmem.storage.postgres.store import PostgresStore

    gate = asyncio.Event()
    base: type = SQLiteStore if backend == "sqlite" else PostgresStore

    class SlowLaneState(base):  # type: ignore[misc]
        """A store whose read of a curation lane's state (right after its lease is taken) waits for ``gate``."""

        async def get_working_memory(self, key: str) -> str | None:
            if "lane:curate" in key and not gate.is_set():
                await gate.wait()
            return await super().get_working_memory(key)  # type: ignore[no-any-return]

    store = SlowLaneState(tmp_path / "m.db" if backend == "sqlite" else request.getfixturevalue("postgres_url"))
    async with Memory(store, knowledge=Knowledge.in_memory()) as memory:
        await memory.create_thread("t1", "alice")
        await cancelled_while_the_model_works(memory, lambda: memory.curate_knowledge("t1"))
        gate.set()
        assert await settled(memory) == []
        run = await memory.curate_knowledge("t1")
        assert run.status != "skipped", run.detail
