"""The knowledge conformance suite: every test here runs against every knowledge adapter.

Time is a :class:`FakeClock`, so ``captured_at`` stamps and lease expiry are exact. PostgreSQL
runs on a fresh database per test (``postgres_url``, from ``tests/postgres_fixtures.py``); the
knowledge store creates its tables there on first use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypedDict

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

ADAPTERS = ["memory", "sqlite", "postgres"]

ORG = "org:acme"
RES = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
T2 = "org:acme/resource:alice/thread:t2"
BOB = "org:acme/resource:bob"


class Act(TypedDict):
    actor: str
    reason: str


ACT: Act = {"actor": "tester", "reason": "conformance"}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=ADAPTERS)
async def kstore(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, anyio_backend: str
) -> AsyncIterator[TablesKnowledgeStore]:
    store: TablesKnowledgeStore
    if request.param == "memory":
        store = InMemoryKnowledgeStore(clock=clock)
    elif request.param == "sqlite":
        store = SQLiteKnowledgeStore(tmp_path / "knowledge.db", clock=clock)
    else:
        store = PostgresKnowledgeStore(request.getfixturevalue("postgres_url"), clock=clock)
    async with store:
        yield store
