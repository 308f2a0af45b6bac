"""``knowledge``: a :class:`Knowledge` on every adapter, in memory, over SQLite (a file in the
test's folder) and over PostgreSQL (a throwaway cluster), for the tests here that take it without
a fixture of their own (a module's own ``knowledge`` fixture takes its place)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    if request.param == "memory":
        graph = Knowledge.in_memory()
    elif request.param == "sqlite":
        graph = Knowledge.sqlite(tmp_path / "k.db")
    else:
        graph = Knowledge.postgres(request.getfixturevalue("postgres_url"))
    async with graph:
        yield graph


@pytest.fixture(params=["memory", "sqlite"])
async def clocked(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Knowledge, FakeClock]]:
    """A :class:`Knowledge` in memory or over SQLite on a :class:`FakeClock` the test moves."""
    clock = FakeClock()
    graph = (Knowledge.in_memory(clock=clock) if request.param == "memory"
             else Knowledge.sqlite(tmp_path / "k.db", clock=clock))
    async with graph:
        yield graph, clock
