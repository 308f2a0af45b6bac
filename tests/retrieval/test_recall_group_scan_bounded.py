"""A group id named without its thread (the model's usual call: ``{"group_id": ...}``) is looked
for in a bounded number of threads, whatever the user's thread count: with retrieval scope
``resource`` a made-up id (models make ids up) read the memory of every thread of the user, and
up to 100 older generations of each, on every call (found by helper-144: 1,500 threads, 1,500
memory reads in one call). Now: the caller's thread (with its older generations, where a group
the actor saw before a reflection lives), then the newest other threads' current memory, at
most ``MAX_GROUP_THREADS``; a group of an older thread is found with ``thread_id``, which search
results carry."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.errors import RecallNotFoundError

from .helpers import dated_messages, groups_of, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio

#: The bound the recall tool documents (``obsmem.om.recall.recaller.MAX_GROUP_THREADS``).
MAX_GROUP_THREADS = 32
OTHERS = MAX_GROUP_THREADS + 40


def _count_reads(memory: Memory) -> Counter[str]:
    """Calls of the store's memory reads, counted on the instance the engine holds."""
    store = memory.store
    counts: Counter[str] = Counter()
    for name in ("get_head", "list_generations", "get_record"):
        method = getattr(store, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _method(*args, **kwargs)

        setattr(store, name, counted)
    return counts


async def _user_with_many_threads(tmp_path: Path) -> Memory:
    memory = memory_for(tmp_path / "o.db", retrieval_config(scope="resource"))
    await replay(memory, "oldest", "alice", dated_messages(40, "o"))  # observed: it has groups
    for i in range(OTHERS):
        turn = await memory.begin_turn(
            thread_id=f"chat-{i:03d}", resource_id="alice", messages=[Message.user(f"hello {i}")]
        )
        await turn.end([Message.assistant("hi")])
    await replay(memory, "newest", "alice", dated_messages(40, "n"))
    await replay(memory, "caller", "alice", dated_messages(40, "c"))
    return memory


async def test_a_made_up_group_id_reads_a_bounded_number_of_threads(tmp_path: Path) -> None:
    memory = await _user_with_many_threads(tmp_path)
    async with memory:
        counts = _count_reads(memory)
        with pytest.raises(RecallNotFoundError):
            await memory.recall("caller", group_id="0123456789ab")
        assert counts["get_head"] <= MAX_GROUP_THREADS + 1, counts
        assert counts["list_generations"] <= 1, counts


async def test_groups_are_still_found(tmp_path: Path) -> None:
    memory = await _user_with_many_threads(tmp_path)
    async with memory:
        own = groups_of((await memory.get_record("caller")).active_observations)[0]  # type: ignore[union-attr]
        newest = groups_of((await memory.get_record("newest")).active_observations)[0]  # type: ignore[union-attr]
        oldest = groups_of((await memory.get_record("oldest")).active_observations)[0]  # type: ignore[union-attr]
        assert (await memory.recall("caller", group_id=own.id)).messages
        assert (await memory.recall("caller", group_id=newest.id)).messages  # a recent thread: no thread_id needed
        # the oldest thread lies past the bound: named with its thread, as search results name it
        assert (await memory.recall("caller", group_id=oldest.id, target_thread_id="oldest")).messages
