"""memory.status(thread) read its in-flight work with a prefix read of the leases per kind: the
status of "t1" also read the leases of "t10", "t100", … "t1999" (every thread whose id extends
its own), a row each, to keep the one whose key is exact. It now reads that key."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_status_reads_its_own_leases_only(tmp_path: Path, url: str) -> None:
    url = f"sqlite:///{tmp_path / 'om.db'}" if url == "sqlite" else url
    async with Memory(url) as memory:
        await memory.create_thread("t1", resource_id="r")
        now = memory.clock.now()
        for n in range(200):  # the work of threads whose ids extend "t1"
            await memory.store.acquire_lease(f"buffer-observation:thread:t1{n}", "w", ttl_s=60, now=now)
        mine = await memory.store.acquire_lease("buffer-observation:thread:t1", "me", ttl_s=60, now=now)
        assert mine is not None
        rows = {"leases": 0}
        store = memory.store
        real_list, real_get = store.list_leases, store.get_lease

        async def listed(*args: object, **kwargs: object) -> object:
            found = await real_list(*args, **kwargs)  # type: ignore[arg-type]
            rows["leases"] += len(found)
            return found

        async def got(key: str) -> object:
            found = await real_get(key)
            rows["leases"] += found is not None
            return found

        store.list_leases, store.get_lease = listed, got  # type: ignore[method-assign]
        status = await memory.status("t1")
        assert status.in_flight == {"buffer-observation": mine.expires_at}
        assert rows["leases"] <= 8, rows  # its own keys: not the 200 of t10… t1199
