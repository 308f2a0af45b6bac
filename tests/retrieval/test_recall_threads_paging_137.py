"""Recall's ``threads`` mode pages by key, like ``messages`` mode (helper-137).

It paged by offset: a thread deleted between page 1 and page 2 moved every later thread up one
place, so page 2 started one thread late and the thread that moved onto page 1 was never shown;
and ``page=1000`` made the store count past every earlier thread. Now every answer with more to
read carries ``next_page`` (a cursor at the next page's first thread), reading on costs one page
whatever the depth, and a ``page`` number still works up to ``MAX_SKIPPED`` threads in. Work is
counted in thread rows the store hands out, never timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from obsmem.om.recall import recaller

from .helpers import memory_for, retrieval_config

pytestmark = pytest.mark.anyio


class ThreadRowsRead:
    """Counts the thread rows ``store.list_threads`` hands out while active."""

    def __init__(self, memory: Memory) -> None:
        self.store = memory.store
        self.rows = 0

    def __enter__(self) -> ThreadRowsRead:
        real = type(self.store).list_threads

        async def counted(*args: Any, **kwargs: Any) -> Any:
            found = await real(self.store, *args, **kwargs)
            self.rows += len(found)
            return found

        self.store.list_threads = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.store.list_threads


async def _memory_with_threads(tmp_path: Path, count: int) -> Memory:
    memory = memory_for(tmp_path / "m.db", retrieval_config(scope="resource"))
    await memory.__aenter__()
    for i in range(count):
        await memory.create_thread(f"t{i:03d}", "alice", title=f"about {i}")
    await memory.create_thread("other", "bob")
    return memory


async def test_a_thread_deleted_between_pages_skips_no_other_thread(tmp_path: Path) -> None:
    memory = await _memory_with_threads(tmp_path, 6)
    async with memory:
        first = await memory.call_recall_tool("t000", {"mode": "threads", "limit": 3})
        assert [t["id"] for t in first["threads"]] == ["t000", "t001", "t002"]
        assert first["has_next_page"]
        # the user deletes a conversation the agent has already seen, before it reads on
        assert await memory.delete_thread("t001")
        # how an agent reads on: next_page where the answer gives one, else the next page number
        args = first.get("next_page") or {"mode": "threads", "limit": 3, "page": 2}
        second = await memory.call_recall_tool("t000", args)
        # was t004, t005: t003, moved onto page 1 by the delete, was never shown
        assert [t["id"] for t in second["threads"]] == ["t003", "t004", "t005"]
        assert not second["has_next_page"] and "next_page" not in second
        # a page number still works (read from where the listing stands now)
        by_number = await memory.recall("t000", mode="threads", limit=2, page=2)
        assert [t.id for t in by_number.threads] == ["t003", "t004"]
        assert by_number.has_next_page and by_number.has_prev_page


async def test_reading_on_with_next_page_shows_every_thread_once_at_one_page_per_call(tmp_path: Path) -> None:
    memory = await _memory_with_threads(tmp_path, 230)
    async with memory:
        seen: list[str] = []
        args: dict[str, Any] | None = {"mode": "threads", "limit": 20}
        while args is not None:
            with ThreadRowsRead(memory) as read:
                answer = await memory.call_recall_tool("t000", args)
            assert read.rows <= 20 + 1, read.rows  # one page (and one more to tell a next one), any depth
            seen += [t["id"] for t in answer["threads"]]
            args = answer.get("next_page")
            assert (args is not None) == answer["has_next_page"]
        assert seen == [f"t{i:03d}" for i in range(230)]


async def test_a_deep_page_number_is_refused_without_reading_every_thread_before_it(tmp_path: Path) -> None:
    memory = await _memory_with_threads(tmp_path, 230)
    async with memory:
        skipped = recaller.MAX_SKIPPED
        with ThreadRowsRead(memory) as read:
            answer = await memory.call_recall_tool("t000", {"mode": "threads", "limit": 20, "page": 1000})
        assert "next_page" in answer.get("error", ""), answer  # was an empty page after 19,980 threads
        assert read.rows <= skipped + 1, read.rows
        # a page within reach still answers by number
        sixth = await memory.call_recall_tool("t000", {"mode": "threads", "limit": 20, "page": 6})
        assert [t["id"] for t in sixth["threads"]] == [f"t{i:03d}" for i in range(100, 120)]
        # the cursor of another user's thread is not within reach, exactly like an unknown id
        stranger = await memory.call_recall_tool("t000", {"mode": "threads", "cursor": "other"})
        unknown = await memory.call_recall_tool("t000", {"mode": "threads", "cursor": "nope"})
        assert "error" in stranger and "error" in unknown
        assert stranger["error"].replace("other", "X") == unknown["error"].replace("nope", "X")


async def test_thread_scope_lists_only_the_caller_with_or_without_a_cursor(tmp_path: Path) -> None:
    memory = memory_for(tmp_path / "m.db", retrieval_config(scope="thread"))
    async with memory:
        for tid in ("t1", "t2"):
            await memory.create_thread(tid, "alice")
        first = await memory.recall("t1", mode="threads")
        assert [t.id for t in first.threads] == ["t1"] and not first.has_next_page and first.next_page is None
        again = await memory.call_recall_tool("t1", {"mode": "threads", "cursor": "t1"})
        assert [t["id"] for t in again["threads"]] == ["t1"]
        other = await memory.call_recall_tool("t1", {"mode": "threads", "cursor": "t2"})
        assert "error" in other
