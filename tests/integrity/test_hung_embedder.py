"""An embedder that never answers does not stop memory work.

Found by a hostile review: with vector retrieval on, the first committed observation re-indexed
its groups by calling the embedder, inside the observation's work and with no bound of its own.
An embeddings server that never finished its answer held that work forever, so no later
observation of the thread started: 8 turns committed one observation, each turn waited its full
``max_turn_wait`` and got a trimmed window. Nothing was lost, but memory stopped. Now indexing
is bounded by ``retrieval.index_timeout_s`` (logged, never raised: the index misses those groups,
the memory does not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.embeddings.base import EmbeddingMatrix
from obsmem.vectors.memory import InMemoryVectorIndex

pytestmark = pytest.mark.anyio


class NeverAnswers:
    """An embedder whose server accepted the request and never answered."""

    name = "never-answers"
    dimensions = 8

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        self.calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_observation_goes_on_while_the_embedder_hangs() -> None:
    embedder = NeverAnswers()
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=200, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
        retrieval={"enabled": True, "vector": True, "index_timeout_s": 0.2},
    )
    memory = Memory("memory://", config=config, embedder=embedder, vector_index=InMemoryVectorIndex(8),
                    max_turn_wait=0.5, close_timeout=1.0)
    async with memory:
        for i in range(12):
            turn = await memory.begin_turn(
                thread_id="t", resource_id="u", messages=[Message.user(f"{i}: the shipment to Lisbon has {i} pallets " * 4)]
            )
            await turn.end([Message.assistant(f"noted {i}")])
        await asyncio.wait_for(memory.settled(), 10)  # (on main: never, the indexing held the work)
        generations = await memory.list_generations("t")
        record = await memory.get_record("t")
        assert record is not None
        observed = [m for m in await memory.list_messages("t") if (m.seq or 0) <= record.cursor("t")]
        assert embedder.calls >= 2, "every committed observation tried to index (each gave up at its bound)"
        assert len(observed) >= 16, f"observation stopped after the embedder hung: {len(observed)} observed"
        assert generations
