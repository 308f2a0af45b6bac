"""``KeyStore.page`` on every backend (what ``GET /api/keys`` reads): the keys of an org, or of
one of its resources, oldest first with the key id breaking ties, ``limit`` at a time after a
cursor, every key once, and nothing of another org. Asserted as the same listing ``list`` gives."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsmem import InvalidInputError
from obsmem.server.keys import ApiKey, KeyStore, MemoryKeyStore, PostgresKeyStore, SQLiteKeyStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyStore]:
    if request.param == "memory":
        yield MemoryKeyStore()
    elif request.param == "sqlite":
        yield SQLiteKeyStore(str(tmp_path / "keys.db"))
    else:
        yield PostgresKeyStore(request.getfixturevalue("postgres_url"))


async def _pages(keys: KeyStore, org: str | None, resource: str | None, limit: int) -> list[ApiKey]:
    found: list[ApiKey] = []
    after = None
    while True:
        page = await keys.page(org, resource_id=resource, limit=limit, after=after)
        assert len(page) <= limit
        found += page
        if len(page) < limit:
            return found
        after = page[-1].key_id


def test_pages_list_every_key_once_in_order(keys: KeyStore) -> None:
    async def run() -> None:
        await keys.setup()
        same = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)  # many keys made in one instant: the key id orders them
        for n in range(23):
            key, _ = await keys.create("acme", resource_id="alice" if n % 3 else "bob", label=f"k{n}")
            if n < 9:  # (the stores keep created_at as written: the same instant for these nine)
                await asyncio.to_thread(keys._insert, ApiKey(f"{n:016x}", "acme", "alice", created_at=same))
        for _ in range(5):
            await keys.create("globex", resource_id="alice")
        everything = await keys.list()
        acme = [k for k in everything if k.org_id == "acme"]
        want = sorted(acme, key=lambda k: (k.created_at, k.key_id))
        for limit in (1, 4, 7, 100):
            assert [k.key_id for k in await _pages(keys, "acme", None, limit)] == [k.key_id for k in want]
        alice = [k.key_id for k in want if k.resource_id == "alice"]
        assert [k.key_id for k in await _pages(keys, "acme", "alice", 5)] == alice
        assert len(await _pages(keys, None, None, 6)) == len(everything) == 23 + 9 + 5
        assert {k.org_id for k in await _pages(keys, "globex", "alice", 2)} == {"globex"}
        with pytest.raises(InvalidInputError):
            await keys.page("acme", limit=0)
        await keys.close()

    asyncio.run(run())
