"""Recall's threads mode reads on with ``next_page`` past a deleted thread (helper-144).

Since 18cdb74 ``next_page`` carried the id of the next page's first thread as its cursor. When that
very thread was deleted before the agent read on (the user erased a chat in another tab), the next
call answered "thread ... not found" instead of the next page; when it was deleted and a new chat
began under the same id, the listing jumped to that new chat (at the end) and every thread between
was never shown. The cursor now records a position in the listing (opaque to the model), so reading
on continues past any deleted thread, on every store; it stays bound to the user's own listing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Thread
from obsmem.om.recall import recaller

from .helpers import retrieval_config

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/recall.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def memory(url: str) -> AsyncIterator[Memory]:
    async with Memory(url, config=retrieval_config(scope="resource")) as memory:
        for i in range(7):
            await memory.create_thread(f"t{i:03d}", "alice", title=f"about {i}")
        await memory.create_thread("b0", "bob")
        await memory.create_thread("b1", "bob")
        yield memory


async def _read_on(memory: Memory, caller: str, args: dict[str, Any]) -> list[str]:
    """Every thread id from ``args`` on, following next_page; an error fails with its text."""
    seen: list[str] = []
    for _ in range(20):
        answer = await memory.call_recall_tool(caller, args)
        assert "error" not in answer, answer
        seen += [t["id"] for t in answer["threads"]]
        if not answer.get("next_page"):
            return seen
        args = answer["next_page"]
        assert len(args["cursor"]) <= 200, args  # what the HTTP API takes
    raise AssertionError("next_page never ended")


async def _first_page(memory: Memory) -> dict[str, Any]:
    first = await memory.call_recall_tool("t000", {"mode": "threads", "limit": 3})
    assert [t["id"] for t in first["threads"]] == ["t000", "t001", "t002"]
    assert first["has_next_page"] and first["next_page"]
    return dict(first["next_page"])


async def test_reading_on_when_the_next_pages_first_thread_was_deleted(memory: Memory) -> None:
    next_page = await _first_page(memory)
    assert await memory.delete_thread("t003")  # erased in another tab before the agent reads on
    # was: {"error": "No thread 't003' is within reach of this recall ..."}
    assert await _read_on(memory, "t000", next_page) == ["t004", "t005", "t006"]


async def test_reading_on_when_the_last_thread_shown_was_deleted(memory: Memory) -> None:
    next_page = await _first_page(memory)
    assert await memory.delete_thread("t002")
    assert await _read_on(memory, "t000", next_page) == ["t003", "t004", "t005", "t006"]


async def test_reading_on_when_both_threads_around_the_page_edge_were_deleted(memory: Memory) -> None:
    next_page = await _first_page(memory)
    assert await memory.delete_thread("t002")
    assert await memory.delete_thread("t003")
    assert await _read_on(memory, "t000", next_page) == ["t004", "t005", "t006"]


async def test_reading_on_when_a_new_chat_began_under_the_deleted_threads_id(memory: Memory) -> None:
    next_page = await _first_page(memory)
    assert await memory.delete_thread("t003")
    await memory.create_thread("t003", "alice", title="a new chat")  # now the newest thread
    # was: t003 (the new chat) alone, t004..t006 never shown
    assert await _read_on(memory, "t000", next_page) == ["t004", "t005", "t006", "t003"]


async def test_the_cursor_is_opaque_and_only_reads_its_own_users_listing(memory: Memory) -> None:
    next_page = await _first_page(memory)
    cursor = next_page["cursor"]
    # no thread id for the model to edit or reuse as another argument (whole ids: the cursor's
    # base64 holds a 3-character piece such as "t00" by chance in about 1 run in 4,000)
    assert not any(f"t{i:03d}" in cursor for i in range(7)), cursor
    # bob's agent given alice's cursor reads none of alice's threads
    stranger = await memory.call_recall_tool("b0", {**next_page})
    # (the error quotes the cursor's start, base64 that may hold "t00" by chance)
    assert "error" in stranger and "t00" not in json.dumps(stranger).replace(cursor[:37], ""), stranger
    # a cursor cut short, with a changed character, or made up: a clear error naming the cursor
    changed = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    for i in range(len("th1."), len(cursor)):  # any one character changed
        edited = cursor[:i] + ("A" if cursor[i] != "A" else "B") + cursor[i + 1 :]
        answer = await memory.call_recall_tool("t000", {**next_page, "cursor": edited})
        assert "error" in answer and "cursor" in answer["error"], (edited, answer)
    for bad in (cursor[:-3], changed, "th1.", "th1.!!", "th1." + "x" * 9, "th1." + "A" * 64):
        answer = await memory.call_recall_tool("t000", {**next_page, "cursor": bad})
        assert "error" in answer and "cursor" in answer["error"], (bad, answer)


async def test_a_forged_cursor_never_lists_another_users_threads(memory: Memory) -> None:
    """A cursor made up by someone who knows how positions are made (the code is open): one that
    names bob's threads, or bob's listing, or an instant out of range, lists alice's own threads
    at most, never bob's, and never crashes."""
    alice = await memory.get_thread("t000")
    bob0, bob1 = await memory.get_thread("b0"), await memory.get_thread("b1")
    listing = memory.recaller._listing(alice)
    forged = [
        recaller._ThreadPosition.of(bob0, bob1).encode(listing),  # bob's threads, alice's listing
        recaller._ThreadPosition.of(bob0, bob1).encode(memory.recaller._listing(bob0)),  # bob's own
        replace(recaller._ThreadPosition.of(bob0, bob1), last_id=None).encode(listing),
        replace(recaller._ThreadPosition.of(alice, bob1), last_us=-(2**63)).encode(listing),
        replace(recaller._ThreadPosition.of(alice, bob1), last_us=2**63 - 1).encode(listing),
        replace(recaller._ThreadPosition.of(alice, bob0), last_id="b0", last_us=0).encode(listing),
    ]
    for cursor in forged:
        answer = await memory.call_recall_tool("t000", {"mode": "threads", "limit": 3, "cursor": cursor})
        listed = [t["id"] for t in answer.get("threads", [])]
        assert "error" in answer or set(listed) <= {f"t{i:03d}" for i in range(7)}, (cursor, answer)
        # the next page's cursor is base64 (it may hold "b0" by chance): it is read, not searched
        following = (answer.get("next_page") or {}).pop("cursor", None)
        if following is not None:
            position = recaller._ThreadPosition.decode(following, listing)
            assert position is not None and position.last_id in {f"t{i:03d}" for i in range(7)}, answer
        # (an error quotes the forged cursor's start: base64 of the threads' instants, which holds
        # "b0" or "b1" by chance in about 1 run in 60; it is the cursor given, not a thread listed)
        shown = json.dumps(answer).replace(cursor[:37], "")
        assert "b0" not in shown and "b1" not in shown, (cursor, answer)


async def test_threads_created_at_the_same_instant_are_each_shown_past_a_delete(url: str) -> None:
    """Threads imported with one created_at (the listing orders them by insertion): reading on
    past a deleted thread at a page's edge loses none of them."""
    same = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
    for deleted in (["s03"], ["s02"], ["s02", "s03"]):
        async with Memory(url, config=retrieval_config(scope="resource")) as memory:
            for i in range(7):
                await memory.store.create_thread(Thread(id=f"s{i:02d}", resource_id="carol", created_at=same))
            first = await memory.call_recall_tool("s00", {"mode": "threads", "limit": 3})
            assert [t["id"] for t in first["threads"]] == ["s00", "s01", "s02"]
            for thread_id in deleted:
                assert await memory.delete_thread(thread_id)
            rest = await _read_on(memory, "s00", first["next_page"])
            unseen = [f"s{i:02d}" for i in range(3, 7) if f"s{i:02d}" not in deleted]
            assert [t for t in rest if t in unseen] == unseen, (deleted, rest)
            assert not set(deleted) & set(rest)
            for i in range(7):
                await memory.delete_thread(f"s{i:02d}")


async def test_long_and_odd_thread_ids_page_with_a_short_cursor_past_deletes(url: str) -> None:
    """Ids with '/', unicode and hundreds of characters: next_page's cursor stays short (the HTTP
    API takes a cursor of at most 200 characters; it was the whole id), and reading on passes a
    deleted thread at the page's edge."""
    ids = [f"chat/ünï-{i}-" + "x" * 300 for i in range(6)] + ["👋/" + "y" * 91, "short"]  # 96 bytes
    async with Memory(url, config=retrieval_config(scope="resource")) as memory:
        for thread_id in ids:
            await memory.create_thread(thread_id, "dana")
        first = await memory.call_recall_tool(ids[0], {"mode": "threads", "limit": 2})
        assert [t["id"] for t in first["threads"]] == ids[:2]
        assert len(first["next_page"]["cursor"]) <= 200, first["next_page"]
        for deleted in ids[1:3]:  # the last one shown and the next page's first
            assert await memory.delete_thread(deleted)
        assert await _read_on(memory, ids[0], first["next_page"]) == ids[3:]
        middle = await memory.call_recall_tool(ids[0], {"mode": "threads", "limit": 4})
        assert [t["id"] for t in middle["threads"]] == [ids[0], *ids[3:6]]
        assert await memory.delete_thread(ids[5])  # the last one shown: its id is not in the cursor
        assert await _read_on(memory, ids[0], middle["next_page"]) == ids[6:]


async def test_a_crowd_of_threads_created_at_one_instant_with_long_ids_is_read_once(url: str) -> None:
    """More threads created at one instant than recall skips in one read (an import), with ids too
    long for the cursor to hold: reading on with next_page shows each of them once, in order."""
    same = datetime(2025, 5, 2, 10, 0, tzinfo=UTC)
    ids = [f"crowd-{i:03d}-" + "z" * 100 for i in range(recaller.MAX_SKIPPED + 60)]
    async with Memory(url, config=retrieval_config(scope="resource")) as memory:
        for thread_id in ids:
            await memory.store.create_thread(Thread(id=thread_id, resource_id="erin", created_at=same))
        assert await _read_on(memory, ids[0], {"mode": "threads", "limit": 50}) == ids
