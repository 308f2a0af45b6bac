"""``Memory.list_threads(newest_first=True)``: a user's most recently active conversations first,
paged with ``next_before``, through the async and the sync API."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import InvalidInputError, Memory, Message, SyncMemory

pytestmark = pytest.mark.anyio


async def test_most_recent_conversations_first(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        for name in ("monday", "tuesday", "wednesday"):
            await memory.create_thread(name, "ann")
        await memory.create_thread("bob's", "bob")
        await memory.save_messages("monday", [Message.user("back to monday's topic")])
        await memory.save_messages("bob's", [Message.user("hello")])

        first = await memory.list_threads("ann", newest_first=True, limit=2)
        assert [t.id for t in first] == ["monday", "wednesday"]
        rest = await memory.list_threads("ann", newest_first=True, limit=2, before=first.next_before)  # type: ignore[attr-defined]
        assert [t.id for t in rest] == ["tuesday"]
        # the default order is still oldest first
        assert [t.id for t in await memory.list_threads("ann")] == ["monday", "tuesday", "wednesday"]
        with pytest.raises(InvalidInputError):
            await memory.list_threads("ann", before=first.next_before)  # type: ignore[attr-defined]


def test_the_sync_api_lists_newest_first() -> None:
    with SyncMemory("memory://") as memory:
        for name in ("a", "b", "c"):
            memory.create_thread(name, "ann")
        memory.save_messages("a", [Message.user("hi")])
        assert [t.id for t in memory.list_threads("ann", newest_first=True)] == ["a", "c", "b"]
        page = memory.list_threads("ann", newest_first=True, limit=1)
        after = memory.list_threads("ann", newest_first=True, before=page.next_before)  # type: ignore[attr-defined]
        assert [t.id for t in after] == ["c", "b"]
