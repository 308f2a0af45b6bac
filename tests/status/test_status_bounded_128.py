"""Bounded (helper-128): ``Memory.status`` (and REST ``/status``, the inspector's panel,
``Memory.watch``) read the thread's whole unobserved window to count it: a thread saved while
memory did not run, 10,000 messages never observed, cost 10,000 rows for every status. It now
reads at most ``WINDOW_READ`` (2,000) of them and says so: ``window_partial`` is set and
``window_tokens`` / ``unobserved_messages`` count those it read (the window holds more).
Work is counted in message rows the store hands out (``tests/rows_read.py``), never timed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import TextPart
from tests.rows_read import RowsRead

pytestmark = pytest.mark.anyio

SAVED = 10_000
READ = 2_000  # obsmem.om.status.WINDOW_READ
START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


def _messages(count: int) -> list[Message]:
    return [
        Message(
            id=f"s{i:05d}", role="user" if i % 2 == 0 else "assistant",
            parts=(TextPart(text=f"Note {i}: the beans in bed {i % 40} need water."),),
            created_at=START + timedelta(seconds=i),
        )
        for i in range(count)
    ]  # fmt: skip


async def test_status_of_a_long_unobserved_window_reads_a_bounded_part_of_it(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", _messages(SAVED))  # memory did not run: nothing observed
        with RowsRead(memory.store) as read:
            status = await memory.status("t1")
        assert read.rows <= READ + 1, read.rows  # was 10,000: the whole window
        data = status.data()
        assert data["window_partial"] is True
        assert data["unobserved_messages"] == READ  # at least: those read
        assert status.block_after is not None and status.window_tokens >= status.block_after
        assert status.phase == "blocked"  # decided on what was read: already past block_after


async def test_status_of_a_short_window_counts_all_of_it(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", _messages(READ))
        status = await memory.status("t1")
        assert status.data()["window_partial"] is False and status.unobserved_messages == READ
        tokens = sum(memory.counter.count_message(m) for m in await memory.list_messages("t1"))
        assert status.window_tokens == tokens
