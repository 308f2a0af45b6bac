"""Bounded (helper-128): a recall call reads about the page it returns, whatever the group's size
or the page number. It read a group's whole span for ``group_id`` (341 rows for a page of 5), and
``page=1000`` read every message before that page (all 1,500 of the thread here, up to 20,001).
Now each page is read by ``seq`` from its anchor; a page number that lies past ``MAX_SKIPPED`` (200)
messages is refused, and every answer's ``next_page`` reads on from any depth at one page's cost.
Work is counted in message rows the store hands out (``tests/rows_read.py``), never timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from obsmem.om.recall import recaller
from obsmem.om.selection import observable_messages
from tests.rows_read import RowsRead

from .helpers import covered_ids, dated_messages, groups_of, memory_for, retrieval_config

pytestmark = pytest.mark.anyio

MESSAGES = 1500


async def _observed_in_one_go(tmp_path: Path) -> Memory:
    """A thread of 1,500 messages saved while memory did not observe, then observed at once:
    a few groups of about 340 messages each."""
    memory = memory_for(tmp_path / "m.db", retrieval_config(message_tokens=1_000_000))
    await memory.__aenter__()
    await memory.create_thread("t1", "alice")
    await memory.save_messages("t1", dated_messages(MESSAGES))
    await memory.observe("t1")
    return memory


async def _recall(memory: Memory, args: dict[str, Any]) -> tuple[dict[str, Any], int]:
    with RowsRead(memory.store) as read:
        answer = await memory.call_recall_tool("t1", args, token_budget=100_000)
    return answer, read.rows


async def _big_group(memory: Memory) -> Any:
    record = await memory.get_record("t1")
    assert record is not None
    group = max(groups_of(record.active_observations), key=lambda g: g.last_seq - g.first_seq)
    assert group.last_seq - group.first_seq >= 300
    return group


async def test_a_page_of_a_large_group_reads_that_page_not_the_group(tmp_path: Path) -> None:
    memory = await _observed_in_one_go(tmp_path)
    async with memory:
        group = await _big_group(memory)
        expected = await covered_ids(memory, group)
        first, rows = await _recall(memory, {"group_id": group.id, "limit": 5})
        assert [m["id"] for m in first["messages"]] == expected[:5]
        assert rows <= 5 + 1, rows  # was the group's whole span (341 rows)
        last, rows = await _recall(memory, {"group_id": group.id, "limit": 5, "anchor": "end"})
        assert [m["id"] for m in last["messages"]] == expected[-5:]
        assert rows <= 5 + 1, rows
        third, rows = await _recall(memory, {"group_id": group.id, "limit": 5, "page": 3})
        assert [m["id"] for m in third["messages"]] == expected[10:15]
        assert rows <= 3 * 5 + 1, rows


async def test_a_deep_page_number_is_refused_without_reading_the_pages_before_it(tmp_path: Path) -> None:
    memory = await _observed_in_one_go(tmp_path)
    async with memory:
        skipped = getattr(recaller, "MAX_SKIPPED", 200)  # 200 (named so the test reads on main too)
        answer, rows = await _recall(memory, {"page": 1000})
        assert "next_page" in answer["error"], answer  # was a page read by reading all 1,500 messages
        assert rows <= skipped + 1, rows
        group = await _big_group(memory)
        answer, rows = await _recall(memory, {"group_id": group.id, "page": 1000, "anchor": "end"})
        assert "next_page" in answer["error"] and rows <= skipped + 1, rows
        # where fewer messages lie that way than the page skips, it is past the end: empty, as before
        answer, rows = await _recall(memory, {"cursor": "m0100", "page": -1000})
        assert not answer["messages"] and not answer["has_next_page"] and rows <= skipped + 1, answer
        deepest = skipped // 20 + 1  # the furthest page of 20 a page number still reaches
        answer, rows = await _recall(memory, {"page": deepest})
        ids = [m.id for m in observable_messages(await memory.list_messages("t1"))]
        assert [m["id"] for m in answer["messages"]] == ids[(deepest - 1) * 20 : deepest * 20]
        assert rows <= skipped + 20 + 1, rows
        assert "error" in (await _recall(memory, {"page": deepest + 1}))[0]


async def _follow(memory: Memory, args: dict[str, Any]) -> tuple[list[list[str]], list[int]]:
    """Every page from ``args`` on, following ``next_page``: the ids of each, and its rows read."""
    pages: list[list[str]] = []
    reads: list[int] = []
    next_args: dict[str, Any] | None = args
    while next_args is not None:
        answer, rows = await _recall(memory, next_args)
        assert "error" not in answer, answer
        assert not answer["truncated"]
        pages.append([m["id"] for m in answer["messages"]])
        reads.append(rows)
        assert answer["has_next_page"] == ("next_page" in answer)
        next_args = answer.get("next_page")
    return pages, reads


async def test_next_page_reads_a_whole_group_one_page_at_a_time(tmp_path: Path) -> None:
    memory = await _observed_in_one_go(tmp_path)
    async with memory:
        group = await _big_group(memory)
        expected = await covered_ids(memory, group)
        pages, reads = await _follow(memory, {"group_id": group.id, "limit": 20})
        assert [mid for page in pages for mid in page] == expected
        assert len(pages) == (len(expected) + 19) // 20
        assert max(reads) <= 20 + 1, reads  # each page costs its own rows and one more
        backwards, reads = await _follow(memory, {"group_id": group.id, "limit": 20, "anchor": "end"})
        assert [mid for page in reversed(backwards) for mid in page] == expected
        assert max(reads) <= 20 + 1, reads


async def test_next_page_reads_a_whole_thread_from_either_end(tmp_path: Path) -> None:
    memory = await _observed_in_one_go(tmp_path)
    async with memory:
        ids = [m.id for m in observable_messages(await memory.list_messages("t1"))]
        pages, reads = await _follow(memory, {"limit": 20})
        assert [mid for page in pages for mid in page] == ids
        assert max(reads) <= 20 + 1 and sum(reads) <= len(ids) + len(pages), reads
        older, reads = await _follow(memory, {"limit": 20, "anchor": "end"})
        assert [mid for page in reversed(older) for mid in page] == ids
        assert max(reads) <= 20 + 1, reads
        # back from a cursor (page -1 reads the other way): next_page goes on the same way
        at = ids.index("m0700")
        before, _ = await _follow(memory, {"cursor": "m0700", "limit": 20, "page": -1})
        assert [mid for page in reversed(before) for mid in page] == ids[:at]


class HeadsRead:
    """Counts the observation records the store hands out (heads and generations) while active."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.records = 0

    def __enter__(self) -> HeadsRead:
        store = self.store
        real_head, real_generations = type(store).get_head, type(store).list_generations

        async def get_head(*args: Any, **kwargs: Any) -> Any:
            found = await real_head(store, *args, **kwargs)
            self.records += 1  # a read, whether or not a head was found
            return found

        async def list_generations(*args: Any, **kwargs: Any) -> Any:
            found = await real_generations(store, *args, **kwargs)
            self.records += len(found)
            return found

        store.get_head, store.list_generations = get_head, list_generations
        return self

    def __exit__(self, *exc: object) -> None:
        del self.store.get_head, self.store.list_generations


async def test_a_group_of_a_named_thread_is_looked_for_in_that_thread_only(tmp_path: Path) -> None:
    """In resource scope a group id was looked for in every thread of the user, oldest first,
    even when the call named the group's thread: 62 record reads for 60 other threads."""
    async with memory_for(tmp_path / "m.db", retrieval_config(scope="resource")) as memory:
        await memory.create_thread("caller", "alice")
        for n in range(60):
            await memory.create_thread(f"other-{n:02d}", "alice")
        await memory.create_thread("owner", "alice")
        await memory.save_messages("owner", dated_messages(40))
        await memory.observe("owner")
        record = await memory.get_record("owner")
        assert record is not None
        group = groups_of(record.active_observations)[0]
        with HeadsRead(memory.store) as read:
            answer = await memory.call_recall_tool("caller", {"group_id": group.id, "thread_id": "owner"})
        assert [m["id"] for m in answer["messages"]][:3] == (await covered_ids(memory, group))[:3]
        assert read.records <= 2, read.records  # was 62: the caller's, 60 others', the owner's
        found = await memory.call_recall_tool("caller", {"group_id": group.id})  # unnamed: still found
        assert found["messages"] and found["messages"][0]["thread_id"] == "owner"
        missing = await memory.call_recall_tool("caller", {"group_id": group.id, "thread_id": "other-00"})
        assert "error" in missing
