"""The ordering guard: ``save_messages(..., after_seq=N)`` saves only while no message of the
thread newer than ``N`` calls or answers a tool, checked in the save's own transaction (what
turns rely on so that no message lands between a tool call and its result, across processes)."""

from __future__ import annotations

import asyncio

import pytest

from obsmem.errors import ThreadChangedError, ThreadNotFoundError
from obsmem.storage import Store
from obsmem.storage.contract import save_marked, save_marked_early
from obsmem.types import Message, Thread, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def call(call_id: str) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(tool_call_id=call_id, tool_name="f", args={}),))


def result(call_id: str) -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, tool_name="f", result="ok"),))


async def test_a_newer_tool_message_refuses_the_save(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first = await store.save_messages("t1", [Message.user("a")], after_seq=0)  # an empty thread
    calling = await store.save_messages("t1", [call("c1")], after_seq=first[0].seq)
    with pytest.raises(ThreadChangedError) as caught:  # checked against a view without the call
        await store.save_messages("t1", [Message.user("b")], after_seq=first[0].seq)
    assert caught.value.newest == calling[0].seq and caught.value.after_seq == first[0].seq
    assert [m.role for m in await store.list_messages("t1")] == ["user", "assistant"]
    answered = await store.save_messages("t1", [result("c1")], after_seq=calling[0].seq)
    with pytest.raises(ThreadChangedError):  # a result is a tool message too
        await store.save_messages("t1", [Message.user("c")], after_seq=calling[0].seq)
    await store.save_messages("t1", [Message.user("d")], after_seq=answered[0].seq)
    assert [m.text for m in await store.list_messages("t1")][-1] == "d"


async def test_newer_messages_without_tool_parts_do_not_count(store: Store) -> None:
    """A plain message cannot leave a call waiting (its own save closed or was refused by any), so
    a batch checked before it is still in a valid place: writers of plain text never conflict."""
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first = await store.save_messages("t1", [Message.user("a")])
    await store.save_messages("t1", [Message.assistant("b"), Message.user("quoting \"tool_call_id\": x")])
    await store.save_messages("t1", [Message.assistant("c")], after_seq=first[0].seq)
    assert [m.text for m in await store.list_messages("t1")][-1] == "c"


async def test_only_the_threads_own_messages_count(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    mine = await store.save_messages("t1", [Message.user("a")])
    await store.save_messages("t2", [call("elsewhere")])  # newer, in another thread
    await store.save_messages("t1", [Message.assistant("b")], after_seq=mine[0].seq)
    with pytest.raises(ThreadNotFoundError):
        await store.save_messages("nope", [Message.user("x")], after_seq=0)


async def test_of_tool_savers_checked_against_the_same_message_exactly_one_goes_in(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    base = (await store.save_messages("t1", [Message.user("base")]))[0].seq or 0

    async def save(call_id: str) -> bool:
        try:
            await store.save_messages("t1", [call(call_id)], after_seq=base)
        except ThreadChangedError:
            return False
        return True

    results = await asyncio.gather(*(save(f"c{i}") for i in range(6)))
    assert sum(results) == 1
    assert len(await store.list_messages("t1")) == 2


async def test_the_marked_saves_keep_the_guard(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first, _, _ = await save_marked(store, "thread:t1", "t1", [call("c1")], after_seq=0)
    with pytest.raises(ThreadChangedError):
        await save_marked(store, "thread:t1", "t1", [Message.user("b")], after_seq=0)
    with pytest.raises(ThreadChangedError):
        await save_marked_early(store, "thread:t1", "t1", [Message.user("c")], after_seq=0)
    saved, _, _, commit = await save_marked_early(store, "thread:t1", "t1", [result("c1")], after_seq=first[0].seq)
    await commit
    assert [m.role for m in await store.list_messages("t1")] == ["assistant", "tool"]
