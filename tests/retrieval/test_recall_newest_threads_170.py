"""A group named without its thread is looked for in the caller's thread, then in the resource's
most recently active other threads: those come from one page of the store's newest-first listing
(``list_threads(newest_first=True)``) instead of a search for them by creation time over several
pages (about 34 rows a read, several reads a call). Same reach as before (the newest thread's
group found, one past the newest 32 not, another user's never); a thread the user went back to
counts as recent; fewer thread rows read a call."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.errors import RecallNotFoundError
from obsmem.om.recall.recaller import MAX_GROUP_THREADS

from .helpers import START, dated_messages, groups_of, replay, retrieval_config
from .test_recall_thread_rows_155 import _count_rows

pytestmark = pytest.mark.anyio

THREADS = 300


def _memory(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Memory:
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
    else:
        url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'rows.db'}"
    return Memory(url, config=retrieval_config(scope="resource"), clock=FakeClock(START))


async def _groups(memory: Memory, thread_id: str) -> list[str]:
    record = await memory.get_record(thread_id)
    assert record is not None
    return [g.id for g in groups_of(record.active_observations)]


@pytest.mark.parametrize("backend", ["sqlite", "memory", "postgres"])
async def test_recall_reads_one_page_of_the_newest_threads(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    memory = _memory(request, tmp_path, backend)
    async with memory:
        await replay(memory, "oldest", "alice", dated_messages(20, "o"))
        for i in range(THREADS):
            await memory.create_thread(f"chat-{i:05d}", "alice")
        await replay(memory, "newest", "alice", dated_messages(20, "n"))
        await replay(memory, "caller", "alice", dated_messages(20, "c"))
        await replay(memory, "bob-1", "bob", dated_messages(20, "b"))  # another user, most recent of all
        (newest,), (oldest,), (bobs,) = [(await _groups(memory, t))[:1] for t in ("newest", "oldest", "bob-1")]
        counts = _count_rows(memory)
        per_call: list[int] = []

        async def measured(call: Awaitable[Any]) -> Any:
            before = counts["rows"]
            try:
                return await call
            finally:
                per_call.append(counts["rows"] - before)

        assert (await measured(memory.recall("caller", group_id=newest))).messages
        for out_of_reach in (oldest, bobs):  # past the newest 32, another user's: as before
            with pytest.raises(RecallNotFoundError):
                await measured(memory.recall("caller", group_id=out_of_reach))
        # one page: the newest 32 other threads, the caller and one more at most (before: ~8 pages of 34)
        assert max(per_call) <= MAX_GROUP_THREADS + 1, per_call

        # the oldest thread, written to again, is among the most recently active: its group is found
        await replay(memory, "oldest", "alice", dated_messages(20, "again"))
        newer_group = (await _groups(memory, "oldest"))[-1]
        assert (await measured(memory.recall("caller", group_id=newer_group))).messages
        assert per_call[-1] <= MAX_GROUP_THREADS + 1, per_call
