"""Re-reading messages: a read after an upsert shows the new content, and what one reader does
to the messages it got never shows in another read (the SQL stores remember decoded rows)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem.storage import Store
from obsmem.types import DataPart, Message, TextPart, Thread, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def reads(store: Store) -> list[list[Message]]:
    """The same messages read every way the contract offers."""
    return [
        await store.list_messages("t1"),
        list(reversed(await store.list_messages("t1", newest_first=True, limit=10))),
        await store.get_messages(["m1", "m2"]),
        await store.list_resource_messages("r1"),
    ]


async def test_a_reread_after_an_upsert_returns_the_new_content(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first = Message.user("one", id="m1", created_at=T0, metadata={"v": 1})
    await store.save_messages("t1", [first, Message.assistant("reply", id="m2", created_at=T0)])
    for _ in range(2):  # read twice, so a store that remembers decoded rows has them
        for listed in await reads(store):
            assert [m.text for m in listed] == ["one", "reply"]
            assert listed[0].metadata == {"v": 1}
    seq = (await store.list_messages("t1"))[0].seq

    await store.save_messages(
        "t1", [Message(id="m1", role="user", parts=(TextPart(text="two"),), metadata={"v": 2})]
    )
    for listed in await reads(store):
        assert [m.text for m in listed] == ["two", "reply"]
        assert listed[0].metadata == {"v": 2}
        assert listed[0].seq == seq and listed[0].created_at == T0

    # Only the metadata changes: still a different row, still the new content.
    await store.save_messages(
        "t1", [Message(id="m1", role="user", parts=(TextPart(text="two"),), metadata={"v": 3})]
    )
    for listed in await reads(store):
        assert listed[0].metadata == {"v": 3} and listed[0].text == "two"

    # A marker appended in place shows too.
    await store.add_message_parts("m1", [DataPart(name="app-signal", data={"k": 1})])
    for listed in await reads(store):
        assert listed[0].parts[-1] == DataPart(name="app-signal", data={"k": 1})

    # Deleted and saved again under the same id: a new seq, the new content.
    await store.delete_messages(["m1"])
    await store.save_messages("t1", [Message.user("three", id="m1", created_at=T0)])
    listed = await store.list_messages("t1")
    assert [m.text for m in listed] == ["reply", "three"] and listed[1].seq != seq
    assert listed[1].metadata == {}


async def test_changing_a_read_message_never_shows_in_another_read(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.save_messages(
        "t1",
        [
            Message.user("hello", id="m1", metadata={"k": [1], "nested": {"a": 1}}),
            Message(
                id="m2",
                role="assistant",
                parts=(
                    ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"}),
                    ToolResultPart(tool_call_id="c1", tool_name="search", result={"hits": [1]}),
                ),
            ),
        ],
    )
    for _ in range(3):
        for listed in await reads(store):
            assert listed[0].metadata == {"k": [1], "nested": {"a": 1}}
            call, result = listed[1].parts
            assert isinstance(call, ToolCallPart) and call.args == {"q": "x"}
            assert isinstance(result, ToolResultPart) and result.result == {"hits": [1]}
            # A careless reader changes what it got.
            listed[0].metadata["k"].append(2)
            listed[0].metadata["nested"]["a"] = 2
            listed[0].metadata["new"] = True
            call.args["q"] = "changed"
            result.result["hits"].append(2)


async def test_saved_messages_come_back_as_they_are_read(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    saved = await store.save_messages(
        "t1",
        [
            Message.user("a", id="m1", created_at=T0, metadata={"x": "y"}),
            Message.assistant("b", id="m2", created_at=T0),
            Message.user("a again", id="m1", created_at=T0),  # the last copy wins, at m1's seq
        ],
    )
    listed = await store.list_messages("t1")
    assert saved[0] == saved[2] == listed[0]
    assert saved[1] == listed[1]
    assert listed[0].text == "a again" and listed[0].metadata == {}
    assert all(m.thread_id == "t1" and m.resource_id == "r1" for m in saved)
