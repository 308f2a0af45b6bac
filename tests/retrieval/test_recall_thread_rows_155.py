"""A group named without its thread (``{"group_id": ...}``, the model's usual recall call) is
looked for in the caller's thread, then in the resource's newest other threads. Finding those
read every thread row of the user on every such call: a user with thousands of conversations
made each recall decode thousands of thread rows, even for a group of the caller's own thread.
The rows read per call must not grow with the user's thread count, and what is reachable must
stay the same: the newest thread's group is found without its thread id, another user's never."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.errors import RecallNotFoundError

from .helpers import START, dated_messages, groups_of, replay, retrieval_config

pytestmark = pytest.mark.anyio

THREADS = 4_000
#: A call reads a few pages of the newest threads (``MAX_GROUP_THREADS``, 32, with the caller
#: and one more: 34 threads a page; about ten such pages here), never the user's whole listing.
ROW_BOUND = THREADS // 5


def _memory(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Memory:
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
    else:
        url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'rows.db'}"
    return Memory(url, config=retrieval_config(scope="resource"), clock=FakeClock(START))


def _count_rows(memory: Memory) -> dict[str, int]:
    """Thread rows the store hands back (listings of one resource and of all), on the instance."""
    store = memory.store
    counts = {"rows": 0, "reads": 0}
    for name in ("list_threads", "list_all_threads"):
        method: Callable[..., Awaitable[list[Any]]] = getattr(store, name)

        async def counted(*args: Any, _method: Any = method, **kwargs: Any) -> list[Any]:
            found = await _method(*args, **kwargs)
            counts["rows"] += len(found)
            counts["reads"] += 1
            return found

        setattr(store, name, counted)
    return counts


async def _first_group(memory: Memory, thread_id: str) -> str:
    record = await memory.get_record(thread_id)
    assert record is not None
    return groups_of(record.active_observations)[0].id


@pytest.mark.parametrize("backend", ["sqlite", "memory", "postgres"])
async def test_recall_by_group_reads_a_bounded_number_of_thread_rows(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    memory = _memory(request, tmp_path, backend)
    async with memory:
        await replay(memory, "oldest", "alice", dated_messages(20, "o"))
        for i in range(THREADS):
            await memory.create_thread(f"chat-{i:05d}", "alice")
        await replay(memory, "newest", "alice", dated_messages(20, "n"))
        await replay(memory, "caller", "alice", dated_messages(20, "c"))
        await replay(memory, "bob-1", "bob", dated_messages(20, "b"))  # another user, created last
        own, newest, oldest, bobs = [
            await _first_group(memory, t) for t in ("caller", "newest", "oldest", "bob-1")
        ]
        counts = _count_rows(memory)
        per_call: list[int] = []

        async def measured(call: Awaitable[Any]) -> Any:
            before = counts["rows"]
            try:
                return await call
            finally:
                per_call.append(counts["rows"] - before)

        assert (await measured(memory.recall("caller", group_id=own))).messages
        assert (await measured(memory.recall("caller", group_id=newest))).messages
        answer = await measured(memory.call_recall_tool("caller", {"group_id": newest}))
        assert answer.get("messages"), answer
        for made_up in ("0123456789ab", oldest, bobs):  # made up, past the newest, another user's
            with pytest.raises(RecallNotFoundError):
                await measured(memory.recall("caller", group_id=made_up))
        # the oldest thread is still reachable by name, as search results name it
        assert (await memory.recall("caller", group_id=oldest, target_thread_id="oldest")).messages
        assert per_call[0] == 0, per_call  # the caller's own group: no listing at all
        assert max(per_call) <= ROW_BOUND, per_call
