"""The conformance suite: every test here runs once against every store adapter.

A behaviour of the storage contract is tested in this folder and nowhere else, so a new
adapter (PostgreSQL) only has to join the ``store`` fixture's parameters to be held to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.storage import MemoryStore, SQLiteStore, Store

ADAPTERS = ["memory", "sqlite"]


@pytest.fixture(params=ADAPTERS)
async def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Store]:
    adapter: Store
    if request.param == "memory":
        adapter = MemoryStore()
    else:
        adapter = SQLiteStore(tmp_path / "conformance.db")
    async with adapter:
        yield adapter
