"""A resource's threads, most recently active first (``list_threads(newest_first=True)``), in
every store, paged with the listing's ``next_before``; and the contract's fallback
(:func:`~obsmem.storage.contract.newest_threads`) for a store whose ``list_threads`` lacks it."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.errors import InvalidInputError, ThreadNotFoundError
from obsmem.storage import Store
from obsmem.storage.contract import ThreadPage, newest_threads
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio


class OldStore:
    """``inner`` as a store written before ``newest_first``: its ``list_threads`` takes only the
    keywords it always took; the threads it hands out are counted."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.rows = 0

    async def list_threads(
        self, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None, since: Any = None
    ) -> list[Thread]:
        page = await self._inner.list_threads(resource_id, limit=limit, offset=offset, after=after, since=since)
        self.rows += len(page)
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _threads(store: Store, resource_id: str, n: int, prefix: str = "t") -> list[str]:
    ids = [f"{prefix}{i}" for i in range(n)]
    for thread_id in ids:
        await store.create_thread(Thread(id=thread_id, resource_id=resource_id))
    return ids


async def _say(store: Store, thread_id: str, text: str = "hi", message_id: str | None = None) -> None:
    message = Message.user(text) if message_id is None else Message.user(text, id=message_id)
    await store.save_messages(thread_id, [message])


async def _ids(page: list[Thread]) -> list[str]:
    return [t.id for t in page]


async def test_most_recently_active_first(store: Store) -> None:
    await _threads(store, "r1", 4)  # t0 .. t3, t3 created last
    await _say(store, "t1", message_id="m1")
    page = await store.list_threads("r1", newest_first=True)
    assert isinstance(page, ThreadPage)
    assert await _ids(page) == ["t1", "t3", "t2", "t0"]
    await _say(store, "t0")
    assert await _ids(await store.list_threads("r1", newest_first=True)) == ["t0", "t1", "t3", "t2"]
    # a message saved again under its id (its parts rewritten) is no new activity
    await _say(store, "t1", "edited", message_id="m1")
    assert await _ids(await store.list_threads("r1", newest_first=True)) == ["t0", "t1", "t3", "t2"]
    # the default order is unchanged: oldest first by creation
    assert await _ids(await store.list_threads("r1")) == ["t0", "t1", "t2", "t3"]


async def test_only_the_resources_threads(store: Store) -> None:
    await _threads(store, "r1", 3)
    await _threads(store, "r2", 3, prefix="other")
    await _say(store, "other0")  # the most recent activity of all, in another resource
    first = await store.list_threads("r1", newest_first=True, limit=2)
    rest = await store.list_threads("r1", newest_first=True, limit=2, before=first.next_before)  # type: ignore[attr-defined]
    assert await _ids(first) + await _ids(rest) == ["t2", "t1", "t0"]
    assert await _ids(await store.list_threads("r2", newest_first=True)) == ["other0", "other2", "other1"]
    assert await store.list_threads("nobody", newest_first=True) == []


async def test_paging_while_threads_are_written(store: Store) -> None:
    await _threads(store, "r1", 8)  # listed t7 .. t0
    seen: list[str] = []
    page = await store.list_threads("r1", newest_first=True, limit=3)
    seen += await _ids(page)
    assert seen == ["t7", "t6", "t5"]
    # between pages: a new thread, a message into a thread already shown, one into a thread not
    # shown yet, and the page's last thread deleted
    await store.create_thread(Thread(id="new", resource_id="r1"))
    await _say(store, "t6")
    await _say(store, "t2")
    await store.delete_thread("t5")
    mark = page.next_before  # type: ignore[attr-defined]
    while True:
        page = await store.list_threads("r1", newest_first=True, limit=3, before=mark)
        seen += await _ids(page)
        if len(page) < 3:
            break
        mark = page.next_before  # type: ignore[attr-defined]
    # every thread whose activity did not change shows once, in order; t6 and t2 moved to the top
    # (t6 is not shown again, t2 is left to the next pass), as did the new thread
    assert seen == ["t7", "t6", "t5", "t4", "t3", "t1", "t0"]
    assert (await _ids(await store.list_threads("r1", newest_first=True, limit=3))) == ["t2", "t6", "new"]


async def test_after_a_thread_and_offset(store: Store) -> None:
    await _threads(store, "r1", 5)
    assert await _ids(await store.list_threads("r1", newest_first=True, after="t3")) == ["t2", "t1", "t0"]
    assert await _ids(await store.list_threads("r1", newest_first=True, after="t3", limit=1, offset=1)) == ["t1"]
    assert await _ids(await store.list_threads("r1", newest_first=True, offset=3)) == ["t1", "t0"]
    with pytest.raises(ThreadNotFoundError):
        await store.list_threads("r1", newest_first=True, after="gone")
    empty = await store.list_threads("r1", newest_first=True, after="t0")
    assert empty == [] and empty.next_before is None  # type: ignore[attr-defined]


async def test_arguments_that_do_not_go_together(store: Store) -> None:
    await _threads(store, "r1", 2)
    page = await store.list_threads("r1", newest_first=True, limit=1)
    with pytest.raises(InvalidInputError):
        await store.list_threads("r1", before=page.next_before)  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError):
        await store.list_threads("r1", newest_first=True, since=page[0].created_at)
    for bad in ("", "x", "-1", "1|2|t0"):
        with pytest.raises(InvalidInputError):
            await store.list_threads("r1", newest_first=True, before=bad)


async def test_the_fallback_gives_the_native_order(store: Store) -> None:
    await _threads(store, "r1", 6)
    await _threads(store, "r2", 2, prefix="other")
    await _say(store, "t2")
    await _say(store, "other1")
    await _say(store, "t4")
    old = OldStore(store)
    native = await _ids(await newest_threads(store, "r1", limit=100))
    assert native == ["t4", "t2", "t5", "t3", "t1", "t0"]
    seen: list[str] = []
    mark = None
    while True:
        page = await newest_threads(old, "r1", limit=4, before=mark)  # type: ignore[arg-type]
        seen += await _ids(page)
        if len(page) < 4:
            break
        mark = page.next_before
    assert seen == native
    assert await _ids(await newest_threads(old, "r1", after="t5")) == ["t3", "t1", "t0"]  # type: ignore[arg-type]
    with pytest.raises(ThreadNotFoundError):
        await newest_threads(old, "r1", after="gone")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await newest_threads(old, "r1", before="nonsense")  # type: ignore[arg-type]


async def test_each_threads_mark_goes_on_after_it(store: Store) -> None:
    await _threads(store, "r1", 5)
    page = await store.list_threads("r1", newest_first=True, limit=4)
    assert isinstance(page, ThreadPage) and len(page.marks) == 4 and page.next_before == page.marks[-1]
    for index, thread in enumerate(page):
        rest = await store.list_threads("r1", newest_first=True, before=page.marks[index])
        assert await _ids(rest) == ["t4", "t3", "t2", "t1", "t0"][index + 1 :], thread.id
