"""The SQL stores' cache of decoded message rows: bounded, keyed by the whole row, shares only
what nobody can change, and never hides a change made through another store object."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from obsmem.storage import SQLiteStore
from obsmem.storage.decoded import DecodedMessages, shareable
from obsmem.types import DataPart, FilePart, Message, ReasoningPart, TextPart, Thread, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def test_only_messages_with_immutable_parts_are_shareable() -> None:
    assert shareable(Message.user("hi"))
    assert shareable(Message(role="assistant", parts=(ReasoningPart(text="r"), TextPart(text="t"))))
    assert shareable(Message(role="user", parts=(FilePart(media_type="image/png", url="https://x/y.png"),)))
    assert shareable(Message(role="assistant", parts=(ToolCallPart(tool_call_id="c", tool_name="n", args="{}"),)))
    assert shareable(Message(role="tool", parts=(ToolResultPart(tool_call_id="c", tool_name="n", result="ok"),)))
    assert not shareable(Message(role="assistant", parts=(ToolCallPart(tool_call_id="c", tool_name="n", args={}),)))
    assert not shareable(Message(role="tool", parts=(ToolResultPart(tool_call_id="c", tool_name="n", result=[1]),)))
    assert not shareable(Message(role="tool", parts=(ToolResultPart(tool_call_id="c", tool_name="n", result=1.5),)))
    assert not shareable(Message(role="user", parts=(TextPart(text="t"), DataPart(name="om-x", data={}))))


def test_the_cache_is_bounded_and_hands_out_fresh_metadata() -> None:
    cache = DecodedMessages(capacity=3)
    messages = [Message.user(f"m{i}", id=f"m{i}", metadata={"i": i}) for i in range(5)]
    for i, message in enumerate(messages):
        cache.put((i, message.id), message, f'{{"i": {i}}}')
    assert len(cache) == 3
    assert cache.get((0, "m0")) is None and cache.get((1, "m1")) is None
    hit = cache.get((4, "m4"))
    assert hit == messages[4] and hit is not messages[4]
    assert hit is not None and hit.metadata is not messages[4].metadata
    hit.metadata["i"] = 99
    again = cache.get((4, "m4"))
    assert again is not None and again.metadata == {"i": 4}

    cache.put((9, "d"), Message(role="user", parts=(DataPart(name="om-x", data={}),)), "{}")
    assert cache.get((9, "d")) is None  # mutable parts are never kept

    small = DecodedMessages(max_chars=64 * 10)
    small.put(("x" * 11,), Message.user("big"), "{}")
    assert small.get(("x" * 11,)) is None  # a row too large for its share is not kept
    for i in range(200):
        small.put((f"{i:09d}",), Message.user("s"), "{}")
    assert 0 < len(small) <= 71


async def test_a_change_through_another_store_object_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    async with SQLiteStore(path) as reader, SQLiteStore(path) as writer:
        await writer.create_thread(Thread(id="t1", resource_id="r1"))
        await writer.save_messages("t1", [Message.user("one", id="m1", metadata={"v": 1})])
        for _ in range(2):
            assert (await reader.list_messages("t1"))[0].text == "one"
        await writer.save_messages("t1", [Message.user("two", id="m1", metadata={"v": 1})])
        assert (await reader.list_messages("t1"))[0].text == "two"
        await writer.save_messages("t1", [Message.user("two", id="m1", metadata={"v": 2})])
        assert (await reader.list_messages("t1"))[0].metadata == {"v": 2}


async def test_a_hand_edited_row_is_decoded_afresh(tmp_path: Path) -> None:
    path = tmp_path / "edited.db"
    async with SQLiteStore(path) as store:
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        await store.save_messages("t1", [Message.user("one", id="m1")])
        assert (await store.list_messages("t1"))[0].text == "one"
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE messages SET parts = ? WHERE id = 'm1'", ('[{"type": "text", "text": "edited"}]',)
            )
        assert (await store.list_messages("t1"))[0].text == "edited"
