"""Shared fixtures: a knowledge store and a main store with agents over them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents
from obsmem.storage import Store, open_store


def observation(*lines: str, day: str = "Mar 3, 2025") -> str:
    """An observation delta as the offline observer writes it."""
    return "\n".join([f"Date: {day}", *lines])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock,
                    anyio_backend: str) -> AsyncIterator[Knowledge]:
    embedder = LexicalHashEmbedder(64)
    if request.param == "memory":
        facade = Knowledge.in_memory(embedder=embedder, clock=clock)
    else:
        facade = Knowledge.sqlite(tmp_path / "k.db", embedder=embedder, clock=clock)
    async with facade:
        yield facade


@pytest.fixture
async def store(anyio_backend: str) -> AsyncIterator[Store]:
    main = open_store("memory://")
    async with main:
        yield main


def agents_for(knowledge: Knowledge, store: Store, clock: FakeClock, **settings: object) -> KnowledgeAgents:
    return KnowledgeAgents(knowledge, store, AgentSettings(**settings), clock=clock)  # type: ignore[arg-type]
