"""The store the sentinel tests plant in, scan and delete from: each test runs on every adapter
(the in-memory store, a SQLite file, a PostgreSQL database copied from the migrated template)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore

ADAPTERS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=ADAPTERS)
async def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Store]:
    adapter: Store
    if request.param == "memory":
        adapter = MemoryStore()
    elif request.param == "sqlite":
        adapter = SQLiteStore(tmp_path / "sentinel.db")
    else:
        adapter = PostgresStore(request.getfixturevalue("postgres_url"), migrate=False)
    async with adapter:
        yield adapter
