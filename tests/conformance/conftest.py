"""The conformance suite: every test here runs once against every store adapter.

A behaviour of the storage contract is tested in this folder and nowhere else, so a new
adapter only has to join the ``store`` fixture's parameters to be held to it. PostgreSQL runs
on a fresh database per test (see ``tests/postgres_fixtures.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore

# Until tests/conftest.py lists it in pytest_plugins, the PostgreSQL fixtures come in here.
from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401

ADAPTERS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=ADAPTERS)
async def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Store]:
    adapter: Store
    if request.param == "memory":
        adapter = MemoryStore()
    elif request.param == "sqlite":
        adapter = SQLiteStore(tmp_path / "conformance.db")
    else:
        # The database is a copy of the migrated template; migrate-on-open is tested in tests/postgres.
        adapter = PostgresStore(request.getfixturevalue("postgres_url"), max_size=25, migrate=False)
    async with adapter:
        yield adapter
