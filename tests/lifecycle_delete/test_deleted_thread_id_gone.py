"""After ``delete_thread`` no row of the store names the thread, on every store.

In resource scope with sharing on, the user's other threads' replies keep a receipt of the
context they were made from (``metadata["obsmem_receipt"]``), whose groups name each thread
shown, the deleted one too; and the resource's record kept the deleted thread's key in its
threads map (its cursor, "cursors never move back"). So an app's thread id (an email address,
a case name) stayed in the file after the delete. Now the receipts lose the deleted thread's
groups and the record its key; the other threads' receipts, cursors and observations stay, and
a thread made again under the same id is observed from its first message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.errors import StorageError
from obsmem.storage.contract import ThreadState
from tests.lifecycle_delete.scan import scan_memory, scan_postgres, scan_sqlite
from tests.lifecycle_delete.sharing import SHARED, talk

pytestmark = pytest.mark.anyio

GONE = "case-ZEBRA-7731@example.org"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Memory, object]]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/m.db"}.get(request.param)
    if url is None:
        url = request.getfixturevalue("postgres_url")
    async with Memory(url, config=SHARED, max_turn_wait=None) as memory:
        yield memory, (tmp_path / "m.db" if request.param == "sqlite" else url)


def scan(memory: Memory, where: object, needle: str) -> list[str]:
    if isinstance(where, Path):
        return scan_sqlite(where, needle)
    if where == "memory://":
        return scan_memory(memory.store, needle)
    return scan_postgres(str(where), needle)


async def other_receipt_threads(memory: Memory) -> set[str]:
    named: set[str] = set()
    for message in await memory.list_messages("other"):
        receipt = await memory.receipt(message.id)
        if receipt is not None:
            named |= {g.thread_id for g in receipt.groups}
            if receipt.raw_span is not None:
                named.add(receipt.raw_span[0])
    return named


async def test_no_row_names_a_deleted_thread(world: tuple[Memory, object]) -> None:
    memory, where = world
    for _ in range(3):
        await talk(memory, GONE, 4, "garden")
        await talk(memory, "other", 4, "boat")
    await memory.settled()
    assert GONE in await other_receipt_threads(memory)  # the receipts named it (the set-up is right)
    assert scan(memory, where, GONE)

    assert await memory.delete_thread(GONE)

    assert scan(memory, where, GONE) == []
    assert await other_receipt_threads(memory) == {"other"}  # the other thread's own groups stay
    record = await memory.get_record("other")
    assert record is not None and set(record.threads) == {"other"} and record.cursor("other") > 0
    assert "boat" in record.active_observations and "garden" not in record.active_observations


async def test_a_thread_made_again_under_the_id_is_observed_from_its_first_message(
    world: tuple[Memory, object],
) -> None:
    memory, _ = world
    await talk(memory, GONE, 6, "garden")
    await talk(memory, "other", 2, "boat")
    await memory.settled()
    assert await memory.delete_thread(GONE)

    await talk(memory, GONE, 6, "orchard")
    await memory.settled()
    record = await memory.get_record(GONE)
    assert record is not None and "orchard" in record.active_observations
    assert "garden" not in record.active_observations
    assert [m.text for m in await memory.list_messages(GONE)][0].startswith("About my orchard: note 0")


async def test_the_record_still_refuses_leaving_out_a_live_threads_cursor(world: tuple[Memory, object]) -> None:
    memory, _ = world
    await talk(memory, GONE, 6, "garden")
    await talk(memory, "other", 6, "boat")
    await memory.settled()
    record = await memory.get_record("other")
    assert record is not None and {GONE, "other"} <= set(record.threads)
    dropped = record.model_copy(update={"threads": {GONE: record.threads[GONE]}})
    with pytest.raises(StorageError, match="backward"):
        await memory.store.update_record(dropped, expected_version=record.version)
    lowered = record.model_copy(update={"threads": {**record.threads, "other": ThreadState(cursor=0)}})
    with pytest.raises(StorageError, match="backward"):
        await memory.store.update_record(lowered, expected_version=record.version)
