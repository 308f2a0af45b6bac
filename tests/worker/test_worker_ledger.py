"""``obsmem worker`` records its model calls in the cost ledger, like the application does
(issue 18): a Memory in queue mode hands its buffers to a worker, and ``Memory.usage`` then reports
the worker's observer calls, scoped to the thread and resource they were for."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.models.base import ModelRequest, ModelResponse, Usage
from obsmem.models.testing import FunctionModel
from obsmem.storage import SQLiteStore
from obsmem.worker import Worker

pytestmark = pytest.mark.anyio

USAGE = Usage(input_tokens=700, output_tokens=40, cached_input_tokens=300, cache_write_tokens=10)


def observer(messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
    n = len(messages[-1].text)
    return ModelResponse(
        f"<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) Kestrel budget noted ({n} chars seen).\n</observations>",
        usage=USAGE,
    )


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=0.25, block_after=3.0),
        reflection=ReflectionConfig(observation_tokens=5_000),
    )


async def test_the_workers_calls_reach_the_ledger(tmp_path: Path) -> None:
    clock = FakeClock()
    model = FunctionModel(observer, name="openai:gpt-4o-mini")
    async with SQLiteStore(tmp_path / "queue.db") as store:
        memory = Memory(store, config=config(), clock=clock, background="queue", observer="offline")
        worker = Worker(store, config=config(), clock=clock, owner="worker-1", observer=model)
        async with memory:
            for n in range(30):
                turn = await memory.begin_turn(
                    thread_id="t1", resource_id="u1",
                    messages=[Message.user(f"Turn {n}: project Kestrel{n} needs a budget of {n * 100} euros.")],
                )
                await turn.step([Message.assistant(f"Noted budget {n * 100} for Kestrel{n}.")])
                await turn.end()
                while await worker.run_once():
                    pass
            report = await memory.usage(resource_id="u1")
            assert (await memory.usage(thread_id="t1")).total() == report.total()
    assert model.calls > 0
    [row] = report.by("role", "model")
    assert (row.role, row.model, row.calls, row.failed) == ("observer", "openai:gpt-4o-mini", model.calls, 0)
    assert (row.input_tokens, row.cached_input_tokens, row.cache_write_tokens, row.output_tokens) == (
        700 * model.calls, 300 * model.calls, 10 * model.calls, 40 * model.calls
    )
    assert row.cost_usd > 0 and row.unpriced_calls == 0
