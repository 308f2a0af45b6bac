"""The schema: ``migrate`` applies each pending step once, and ``dry_run`` only reads."""

from __future__ import annotations

import pytest

from obsmem.errors import StoreClosedError
from obsmem.storage import Store
from obsmem.types import Thread

pytestmark = pytest.mark.anyio


async def test_migrate_applies_what_dry_run_lists_then_nothing(store: Store) -> None:
    pending = await store.migrate(dry_run=True)
    assert await store.migrate(dry_run=True) == pending  # listing changed nothing
    assert await store.migrate() == pending
    assert await store.migrate(dry_run=True) == [] and await store.migrate() == []
    assert (await store.create_thread(Thread(id="t1", resource_id="r1"))).id == "t1"


async def test_a_closed_store_refuses_to_migrate(store: Store) -> None:
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.migrate()
