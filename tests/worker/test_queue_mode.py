"""``Memory(background="queue")``: due buffers go to the store's work queue, and a worker runs them.

On SQLite, the embedded store; the same queue on PostgreSQL is covered by tests/postgres. The
application never starts a background task, yet its turns activate the chunks the worker
buffered, and every message still reaches the actor exactly once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.errors import ConfigError
from obsmem.om.engine import EngineEvent
from obsmem.storage import SQLiteStore
from obsmem.worker import Worker

pytestmark = pytest.mark.anyio


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=0.25, block_after=3.0),
        reflection=ReflectionConfig(observation_tokens=5_000),
    )


def turn_text(n: int) -> str:
    return f"Turn {n}: my project Kestrel{n} needs a budget of {n * 100} euros and a review on day {n}."


async def test_due_buffers_are_queued_and_a_worker_buffers_them(tmp_path: Path) -> None:
    clock = FakeClock()
    events: list[EngineEvent] = []
    async with SQLiteStore(tmp_path / "queue.db") as store:
        memory = Memory(store, config=config(), clock=clock, background="queue", on_event=events.append)
        worker = Worker(store, config=config(), clock=clock, owner="worker-1")
        worked = 0
        async with memory:
            for n in range(40):
                turn = await memory.begin_turn(
                    thread_id="t1", resource_id="u1", messages=[Message.user(turn_text(n))]
                )
                await turn.step([Message.assistant(f"Noted budget {n * 100} for Kestrel{n}.")])
                await turn.end()
                assert memory.background.pending == 0  # nothing runs in the application
                while await worker.run_once():
                    worked += 1
            context = await memory.get_context("t1")
            stored = await memory.list_messages("t1")
        kinds = [e.kind for e in events]
        assert "buffer-start" not in kinds  # the application never buffered...
        assert worked > 0 and worker.stats.completed == worked  # ...the worker did
        assert "activation" in kinds  # and the turns activated its chunks
        assert not [e for e in events if e.kind == "observation-start"]  # never had to wait
        shown = "\n".join(m.text for m in context.messages)
        # every message reaches the actor once: observed (its budget is in the observations) or raw
        for n in range(40):
            assert f"{n * 100}" in shown, n
        assert len(stored) == 80
        assert await store.list_work() == []  # nothing stranded in the queue


async def test_queue_mode_needs_buffering() -> None:
    no_buffers = MemoryConfig(observation=ObservationConfig(message_tokens=400, buffer_tokens=False))
    with pytest.raises(ConfigError, match="background"):
        Memory("memory://", config=no_buffers, background="queue")
    with pytest.raises(ConfigError, match="background"):
        Memory("memory://", background="threads")  # type: ignore[arg-type]
