"""A port handed to obsmem as a delegating wrapper (a class that logs, meters or audits calls and
forwards everything else with ``__getattr__``) works on every Python obsmem supports.

Python 3.12 changed ``isinstance`` against ``runtime_checkable`` protocols to look members up
statically, which never reaches ``__getattr__``: on 3.12 and 3.13 ``Memory(store=wrapper)`` was
refused ("expected a Store, a URL or None"), and so were such an observer model, embedder, vector
index, and the worker's and ``enqueue_thread_work``'s store. These tests run under whichever
Python runs the suite (the CI's is 3.11, where they passed before; under 3.13 they failed).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig, RetrievalConfig
from obsmem.embeddings.lexical import LexicalHashEmbedder
from obsmem.models.testing import FunctionModel
from obsmem.storage.memory import MemoryStore
from obsmem.vectors.memory import InMemoryVectorIndex
from obsmem.worker import Worker, enqueue_thread_work

pytestmark = pytest.mark.anyio


class Forwarding:
    """Counts the calls it forwards; every member comes from ``__getattr__``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.forwarded: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.forwarded.append(name)
        return getattr(self._inner, name)


def _observe(messages: list[Message], settings: Any) -> str:
    return "<observations>\n* 🔴 (10:00) The user asked about invoices.\n</observations>"


async def test_a_forwarding_store_serves_a_turn() -> None:
    store = Forwarding(MemoryStore())
    async with Memory(store) as memory:  # type: ignore[arg-type]
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi")])
        await turn.end([Message.assistant("hello")])
        assert [m.text for m in await memory.list_messages("t")] == ["hi", "hello"]
    assert "save_messages_marked_early" in store.forwarded or "save_messages" in store.forwarded


async def test_a_forwarding_model_observes() -> None:
    model = Forwarding(FunctionModel(_observe, name="test:observer"))
    config = MemoryConfig(observation=ObservationConfig(message_tokens=200, buffer_tokens=False))
    async with Memory("memory://", observer=model, config=config) as memory:  # type: ignore[arg-type]
        for i in range(4):
            turn = await memory.begin_turn(
                thread_id="t", resource_id="u", messages=[Message.user(f"question {i} about the invoices " * 8)]
            )
            await turn.end([Message.assistant(f"answer {i} about the invoices " * 8)])
        await memory.observe("t")
        assert "request" in model.forwarded
        assert any("The user asked about invoices." in g.active_observations for g in await memory.list_generations("t"))


async def test_a_forwarding_embedder_and_index_are_taken() -> None:
    embedder = Forwarding(LexicalHashEmbedder(64))
    index = Forwarding(InMemoryVectorIndex(64))
    config = MemoryConfig(retrieval=RetrievalConfig(enabled=True, vector=True))
    async with Memory("memory://", config=config, embedder=embedder, vector_index=index) as memory:  # type: ignore[arg-type]
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi")])
        await turn.end([Message.assistant("hello")])


async def test_the_worker_takes_a_forwarding_store() -> None:
    store = Forwarding(MemoryStore())
    async with Memory(store, background="queue") as memory:  # type: ignore[arg-type]
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi")])
        await turn.end([Message.assistant("hello")])
    await enqueue_thread_work(store, "t", now=datetime.now(UTC))  # type: ignore[arg-type]
    worker = Worker(store)  # type: ignore[arg-type]
    while await worker.run_once():
        pass
    assert "claim_work" in store.forwarded
