"""Shared fixtures of the integrity tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory

#: The stores a test run on "every store" runs on.
STORES = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=STORES)
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    """A ``Memory`` on each store in turn (PostgreSQL: a throwaway cluster's database)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'om.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    async with Memory(url) as opened:
        yield opened
