"""Expired leases were never deleted: a key taken once and never released (a REST turn the
client left, a process killed while holding one) kept its row for ever, so a long-running
server's ``leases`` table grew by one row per such key. Taking a key now also deletes leases
expired for longer than :data:`~obsmem.storage.contract.LEASE_PURGE_AFTER_S` (a bounded number
per acquisition), in every store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.contract import LEASE_PURGE_AFTER_S
from obsmem.storage.postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TTL = 600.0
ROUNDS, PER_ROUND = 6, 30


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Store]:
    adapter: Store
    if request.param == "memory":
        adapter = MemoryStore()
    elif request.param == "sqlite":
        adapter = SQLiteStore(tmp_path / "leases.db")
    else:
        adapter = PostgresStore(request.getfixturevalue("postgres_url"), max_size=5, migrate=False)
    async with adapter:
        yield adapter


async def test_leases_left_to_expire_do_not_pile_up(store: Store) -> None:
    """Each round takes 30 keys and never releases them; the rounds are an expiry-and-purge
    time apart. The table holds the newest rounds' leases, not every round's."""
    counts = []
    for round_ in range(ROUNDS):
        now = at(round_ * (TTL + LEASE_PURGE_AFTER_S + 1))
        for i in range(PER_ROUND):
            assert await store.acquire_lease(f"rest-turn:r{round_}-{i}", f"owner-{i}", ttl_s=TTL, now=now)
        counts.append(len(await store.list_leases("rest-turn:")))
    assert counts == [PER_ROUND] * ROUNDS, counts


async def test_a_lease_expired_less_long_ago_stays_and_one_held_stays(store: Store) -> None:
    held = await store.acquire_lease("work:held", "a", ttl_s=10 * LEASE_PURGE_AFTER_S, now=at(0))
    assert await store.acquire_lease("work:recent", "b", ttl_s=TTL, now=at(LEASE_PURGE_AFTER_S))
    assert await store.acquire_lease("work:old", "c", ttl_s=TTL, now=at(0))
    # work:old expired at +TTL, more than the purge age ago; work:recent only just expired
    later = at(LEASE_PURGE_AFTER_S + TTL + 1)
    assert await store.acquire_lease("work:new", "d", ttl_s=TTL, now=later)
    assert [lease.key for lease in await store.list_leases("work:")] == ["work:held", "work:new", "work:recent"]
    assert await store.get_lease("work:held") == held
    # the holder of a recently expired lease may still release it
    assert await store.release_lease("work:recent", "b")
    # a purged key is free: taken again with a new, higher token
    again = await store.acquire_lease("work:old", "e", ttl_s=TTL, now=later)
    assert again is not None and held is not None and again.token > held.token


async def test_an_expired_key_taken_again_is_taken_in_place(store: Store) -> None:
    old = await store.acquire_lease("k:old", "a", ttl_s=TTL, now=at(0))
    late = at(TTL + LEASE_PURGE_AFTER_S + 1)
    taken = await store.acquire_lease("k:old", "c", ttl_s=TTL, now=late)  # the expired key itself
    assert taken is not None and old is not None and taken.owner == "c" and taken.token > old.token
    assert await store.list_leases("k:") == [taken]


async def test_many_acquirers_purging_at_once_all_get_their_keys(store: Store) -> None:
    """Twenty acquisitions at once, each purging the same expired rows: none fails or waits on
    another's purge (PostgreSQL: no deadlock), and the expired rows go."""
    for i in range(150):
        assert await store.acquire_lease(f"old:{i}", "gone", ttl_s=TTL, now=at(0))
    late = at(TTL + LEASE_PURGE_AFTER_S + 1)
    taken = await asyncio.gather(
        *(store.acquire_lease(f"new:{i}", f"owner-{i}", ttl_s=TTL, now=late) for i in range(20))
    )
    assert all(lease is not None for lease in taken)
    assert len(await store.list_leases("new:")) == 20
    assert await store.list_leases("old:") == []
