"""Deleting a thread with a short id reads only the replies whose receipts name it.

``delete_thread`` takes the deleted thread's id out of the receipts of the user's other threads'
replies, reading only the messages whose stored metadata holds the id (searched in the store).
It searched for the id's letters alone: an id like "t", "u", "me" or "1" is in every receipt
(its key, "obsmem_receipt", a hash, a seq), so every reply of every other thread was read and
decoded. The search is for the id as a whole JSON string now ('"t"')."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from tests.lifecycle_delete.sharing import SHARED, talk

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/m.db"}.get(request.param)
    if url is None:
        url = request.getfixturevalue("postgres_url")
    async with Memory(url, config=SHARED, max_turn_wait=None) as memory:
        yield memory


def counting(memory: Memory) -> list[Any]:
    read: list[Any] = []
    page = memory.store.metadata_messages_page  # type: ignore[attr-defined]

    async def counted(thread_id: str, **kwargs: Any) -> Any:
        found = await page(thread_id, **kwargs)
        read.extend(found)
        return found

    memory.store.metadata_messages_page = counted  # type: ignore[attr-defined]
    return read


async def named(memory: Memory, thread_id: str, gone: str) -> int:
    count = 0
    for message in await memory.list_messages(thread_id, limit=1000):
        receipt = await memory.receipt(message.id)
        if receipt is not None and (
            any(g.thread_id == gone for g in receipt.groups) or (receipt.raw_span or ("",))[0] == gone
        ):
            count += 1
    return count


@pytest.mark.parametrize("gone", ["t", "1", "me"])
async def test_a_short_id_named_by_no_receipt_reads_no_reply(memory: Memory, gone: str) -> None:
    await talk(memory, gone, 1, "garden")  # never observed: no receipt names it
    await talk(memory, "other", 20, "boat")
    await memory.settled()
    replies = [m for m in await memory.list_messages("other", limit=1000) if await memory.receipt(m.id)]
    assert len(replies) >= 10 and await named(memory, "other", gone) == 0
    read = counting(memory)
    assert await memory.delete_thread(gone)
    assert read == []


async def test_a_short_id_named_by_receipts_reads_those_and_takes_it_out(memory: Memory) -> None:
    for _ in range(3):
        await talk(memory, "t", 4, "garden")
        await talk(memory, "t2", 4, "boat")
    await memory.settled()
    naming = await named(memory, "t2", "t")
    assert naming > 0
    read = counting(memory)
    assert await memory.delete_thread("t")
    assert len(read) == naming
    assert await named(memory, "t2", "t") == 0
    record = await memory.get_record("t2")
    assert record is not None and set(record.threads) == {"t2"}
