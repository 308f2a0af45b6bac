"""Deleting a thread or a resource released its leases by listing every lease of the store (all
users' observation, reflection and buffer leases) and picking its own: a delete read as many
lease rows as the store held, though it knows each key it releases. It now reads its own keys."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.storage import leasing
from obsmem.storage.contract import lineage_key

pytestmark = pytest.mark.anyio

OTHERS = 300


def _counting(memory: Memory) -> dict[str, int]:
    rows = {"list_leases": 0}
    store = memory.store
    real = store.list_leases

    async def counted(*args: object, **kwargs: object) -> object:
        found = await real(*args, **kwargs)  # type: ignore[arg-type]
        rows["list_leases"] += len(found)
        return found

    store.list_leases = counted  # type: ignore[method-assign]
    return rows


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
@pytest.mark.parametrize("erase", ["delete_thread", "delete_resource"])
async def test_a_delete_reads_only_the_leases_it_releases(tmp_path: Path, url: str, erase: str) -> None:
    url = f"sqlite:///{tmp_path / 'om.db'}" if url == "sqlite" else url
    async with Memory(url) as memory:
        now = datetime.now(UTC)
        for n in range(OTHERS):  # other users' work in progress
            await memory.store.acquire_lease(f"obs:thread:other{n}", "w", ttl_s=600, now=now)
        turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user("hi")])
        await turn.end()
        mine = leasing.lineage_lease(leasing.SYNC_OBSERVATION, lineage_key("thread", "t1", ""))
        assert await memory.store.acquire_lease(mine, "worker-of-alice", ttl_s=600, now=now)
        rows = _counting(memory)
        if erase == "delete_thread":
            await memory.delete_thread("t1")
        else:
            await memory.delete_resource("alice")
        assert await memory.store.get_lease(mine) is None  # released
        assert rows["list_leases"] < 10, rows  # not the store's 300 other leases
        others = [await memory.store.get_lease(f"obs:thread:other{n}") for n in (0, OTHERS - 1)]
        assert all(lease is not None for lease in others)  # other users' leases stay
