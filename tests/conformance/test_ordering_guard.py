"""The ordering guard: ``save_messages(..., after_seq=N)`` saves only while the thread's newest
message is ``N`` or older, checked in the save's own transaction (what turns rely on so that no
message lands between a tool call and its result, across processes)."""

from __future__ import annotations

import asyncio

import pytest

from obsmem.errors import ThreadChangedError, ThreadNotFoundError
from obsmem.storage import Store
from obsmem.storage.contract import save_marked, save_marked_early
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio


async def test_a_save_checked_against_the_newest_message_goes_in(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first = await store.save_messages("t1", [Message.user("a")], after_seq=0)  # an empty thread
    second = await store.save_messages("t1", [Message.assistant("b")], after_seq=first[0].seq)
    assert [m.text for m in await store.list_messages("t1")] == ["a", "b"]
    # An older bound than the newest is refused, nothing saved; a re-save by id changes no seq.
    with pytest.raises(ThreadChangedError) as caught:
        await store.save_messages("t1", [Message.user("c")], after_seq=first[0].seq)
    assert caught.value.newest == second[0].seq and caught.value.after_seq == first[0].seq
    assert [m.text for m in await store.list_messages("t1")] == ["a", "b"]
    again = second[0].model_copy(update={"parts": Message.assistant("b2").parts})
    await store.save_messages("t1", [again], after_seq=second[0].seq)
    assert [m.text for m in await store.list_messages("t1")] == ["a", "b2"]


async def test_only_the_threads_own_messages_count(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    mine = await store.save_messages("t1", [Message.user("a")])
    await store.save_messages("t2", [Message.user("elsewhere")])  # a newer seq, in another thread
    await store.save_messages("t1", [Message.assistant("b")], after_seq=mine[0].seq)
    with pytest.raises(ThreadNotFoundError):
        await store.save_messages("nope", [Message.user("x")], after_seq=0)


async def test_of_savers_checked_against_the_same_message_exactly_one_goes_in(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    base = (await store.save_messages("t1", [Message.user("base")]))[0].seq or 0

    async def save(text: str) -> bool:
        try:
            await store.save_messages("t1", [Message.assistant(text)], after_seq=base)
        except ThreadChangedError:
            return False
        return True

    results = await asyncio.gather(*(save(f"m{i}") for i in range(6)))
    assert sum(results) == 1
    assert len(await store.list_messages("t1")) == 2


async def test_the_marked_saves_keep_the_guard(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first, _, _ = await save_marked(store, "thread:t1", "t1", [Message.user("a")], after_seq=0)
    with pytest.raises(ThreadChangedError):
        await save_marked(store, "thread:t1", "t1", [Message.user("b")], after_seq=0)
    with pytest.raises(ThreadChangedError):
        await save_marked_early(store, "thread:t1", "t1", [Message.user("c")], after_seq=0)
    saved, _, _, commit = await save_marked_early(
        store, "thread:t1", "t1", [Message.user("d")], after_seq=first[0].seq
    )
    await commit
    assert [m.text for m in await store.list_messages("t1")] == ["a", "d"]
