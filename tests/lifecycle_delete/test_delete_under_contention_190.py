"""A delete whose write of the resource's record loses every compare-and-set to other writers.

In resource scope ``delete_thread`` takes the thread's sections (and its key) out of the user's
shared record with a compare-and-set, composed again each time another writer got in first (the
user's other threads observing, another process), a few times. When every try lost, the engine
gave up without a word and the delete went on and returned True: the deleted thread's
observations stayed in the live record, shown to the user's other threads. Now the delete stops
with StorageError (its note stays) and calling it again finishes it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from obsmem.errors import StorageError
from tests.lifecycle_delete.sharing import SHARED, talk

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/m.db"}[request.param]
    async with Memory(url, config=SHARED, max_turn_wait=None) as memory:
        yield memory


async def test_a_delete_that_loses_every_write_does_not_say_it_is_done(memory: Memory) -> None:
    for _ in range(2):
        await talk(memory, "g", 4, "garden")
        await talk(memory, "other", 4, "boat")
    await memory.settled()
    store: Any = memory.store
    update = store.update_record
    busy = [True]

    async def contended(record: Any, *, expected_version: int) -> Any:
        # Another writer (a busy user's other threads, another process) gets in first each time.
        if busy[0] and record.scope == "resource":
            head = await store.get_record(record.id)
            await update(head.model_copy(update={"updated_at": head.updated_at}), expected_version=head.version)
        return await update(record, expected_version=expected_version)

    store.update_record = contended
    try:
        done = await memory.delete_thread("g")
    except StorageError:
        done = False
    busy[0] = False
    record = await memory.get_record("other")
    assert record is not None
    if done:  # a delete that says it is done took the thread out
        assert "garden" not in record.active_observations and "g" not in record.threads
    else:  # else it can be finished
        assert await memory.unfinished_delete("g") is not None
        assert await memory.delete_thread("g")
        record = await memory.get_record("other")
        assert record is not None
        assert "garden" not in record.active_observations and "g" not in record.threads
    assert "boat" in record.active_observations
