"""Messages: store-assigned seq, idempotent upserts, ordered listing, marker appends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from obsmem.errors import InvalidInputError, MessageNotFoundError
from obsmem.storage import Store
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    Thread,
    ToolCallPart,
    ToolResultPart,
)

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def thread(store: Store, thread_id: str = "t1", resource_id: str = "r1") -> Thread:
    return await store.create_thread(Thread(id=thread_id, resource_id=resource_id))


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_save_assigns_increasing_seq_and_owner(store: Store) -> None:
    await thread(store)
    saved = await store.save_messages("t1", [Message.user("a"), Message.assistant("b")])
    more = await store.save_messages("t1", [Message.user("c")])
    assert all(m.seq is not None for m in saved + more)
    seqs = [m.seq or 0 for m in saved + more]
    assert all(s > 0 for s in seqs)
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert all(m.thread_id == "t1" and m.resource_id == "r1" for m in saved + more)
    assert await store.count_messages("t1") == 3


async def test_seq_is_one_counter_across_threads(store: Store) -> None:
    await thread(store, "t1")
    await thread(store, "t2", "r2")
    a = await store.save_messages("t1", [Message.user("a")])
    b = await store.save_messages("t2", [Message.user("b")])
    c = await store.save_messages("t1", [Message.user("c")])
    assert a[0].seq is not None and b[0].seq is not None and c[0].seq is not None
    assert a[0].seq < b[0].seq < c[0].seq


async def test_saving_same_id_again_never_duplicates(store: Store) -> None:
    await thread(store)
    original = Message.user("draft", id="m1", created_at=T0, metadata={"v": 1})
    (first,) = await store.save_messages("t1", [original])
    await store.save_messages("t1", [Message.user("other")])
    resaved = Message(
        id="m1",
        role="assistant",
        parts=(TextPart(text="final"), DataPart(name="app-signal", data={"k": 2})),
        created_at=T0 + timedelta(hours=1),
        metadata={"v": 2},
    )
    (second,) = await store.save_messages("t1", [resaved])

    assert second.seq == first.seq
    assert second.created_at == T0  # created_at is kept
    assert second.role == "assistant" and second.parts == resaved.parts and second.metadata == {"v": 2}
    assert await store.count_messages("t1") == 2
    listed = await store.list_messages("t1")
    assert listed[0].id == "m1" and listed[0] == second


async def test_duplicate_id_within_one_batch_is_stored_once(store: Store) -> None:
    await thread(store)
    out = await store.save_messages("t1", [Message.user("one", id="m1"), Message.user("two", id="m1")])
    assert await store.count_messages("t1") == 1
    assert out[0].seq == out[1].seq
    assert texts(await store.list_messages("t1")) == ["two"]


async def test_same_id_in_another_thread_is_refused(store: Store) -> None:
    await thread(store, "t1")
    await thread(store, "t2")
    await store.save_messages("t1", [Message.user("mine", id="m1")])
    with pytest.raises(InvalidInputError):
        await store.save_messages("t2", [Message.user("fresh", id="m2"), Message.user("theirs", id="m1")])
    # The whole batch was refused: nothing was written to t2, t1 is unchanged.
    assert await store.count_messages("t2") == 0
    assert texts(await store.list_messages("t1")) == ["mine"]


async def test_message_claiming_another_thread_is_refused(store: Store) -> None:
    await thread(store, "t1")
    with pytest.raises(InvalidInputError):
        await store.save_messages("t1", [Message.user("x", thread_id="t9")])
    with pytest.raises(InvalidInputError):
        await store.save_messages("t1", [Message.user("x", resource_id="r9")])
    ok = await store.save_messages("t1", [Message.user("x", thread_id="t1", resource_id="r1")])
    assert ok[0].seq is not None


async def test_list_filters_and_orders(store: Store) -> None:
    await thread(store)
    saved = await store.save_messages("t1", [Message.user(str(i)) for i in range(6)])
    seqs = [m.seq or 0 for m in saved]

    assert texts(await store.list_messages("t1")) == ["0", "1", "2", "3", "4", "5"]
    assert texts(await store.list_messages("t1", after_seq=seqs[1])) == ["2", "3", "4", "5"]
    assert texts(await store.list_messages("t1", before_seq=seqs[2])) == ["0", "1"]
    assert texts(await store.list_messages("t1", after_seq=seqs[0], before_seq=seqs[4])) == ["1", "2", "3"]
    assert texts(await store.list_messages("t1", limit=2)) == ["0", "1"]
    assert texts(await store.list_messages("t1", limit=2, newest_first=True)) == ["5", "4"]
    assert texts(await store.list_messages("t1", newest_first=True)) == ["5", "4", "3", "2", "1", "0"]
    assert texts(await store.list_messages("t1", before_seq=seqs[3], limit=2, newest_first=True)) == [
        "2",
        "1",
    ]
    assert await store.list_messages("t1", after_seq=seqs[-1]) == []
    assert await store.list_messages("t1", limit=0) == []


async def test_list_resource_messages_spans_threads_by_seq(store: Store) -> None:
    await thread(store, "t1", "r1")
    await thread(store, "t2", "r1")
    await thread(store, "t3", "r2")
    a = await store.save_messages("t1", [Message.user("a")])
    await store.save_messages("t2", [Message.user("b")])
    await store.save_messages("t3", [Message.user("elsewhere")])
    await store.save_messages("t1", [Message.user("c")])
    everything = await store.list_resource_messages("r1")
    assert texts(everything) == ["a", "b", "c"]
    assert [m.thread_id for m in everything] == ["t1", "t2", "t1"]
    assert all(m.resource_id == "r1" for m in everything)
    assert texts(await store.list_resource_messages("r1", after_seq=a[0].seq or 0)) == ["b", "c"]
    assert await store.list_resource_messages("nobody") == []


async def test_resource_messages_after_each_threads_cursor(store: Store) -> None:
    """Each thread from its own cursor on (a thread not named: whole), the excluded thread and
    other resources never, by seq; a cursor for a thread of another resource reads nothing."""
    for tid, rid in (("t1", "r1"), ("t2", "r1"), ("t3", "r1"), ("me", "r1"), ("x", "r2")):
        await thread(store, tid, rid)
    t1 = await store.save_messages("t1", [Message.user("t1-a"), Message.user("t1-b")])
    await store.save_messages("t2", [Message.user("t2-a")])
    await store.save_messages("me", [Message.user("me-a")])
    await store.save_messages("x", [Message.user("x-a")])
    t2 = await store.save_messages("t2", [Message.user("t2-b")])
    await store.save_messages("t3", [Message.user("t3-a")])
    await store.save_messages("t1", [Message.user("t1-c")])
    cursors = {"t1": t1[1].seq or 0, "t2": t2[0].seq or 0, "me": 0, "x": 0}
    found = await store.list_resource_messages_after("r1", cursors, exclude_thread_id="me")
    assert texts(found) == ["t3-a", "t1-c"]  # t2 observed to its end; t3 named by no cursor: whole
    assert [m.seq for m in found] == sorted(m.seq or 0 for m in found)
    assert all(m.resource_id == "r1" for m in found)
    everything = await store.list_resource_messages_after("r1", {})
    assert texts(everything) == texts(await store.list_resource_messages("r1"))
    assert texts(await store.list_resource_messages_after("r1", {"t1": 0}, exclude_thread_id="t2")) == [
        "t1-a", "t1-b", "me-a", "t3-a", "t1-c",
    ]
    assert await store.list_resource_messages_after("r2", {"x": 10**12}) == []
    assert await store.list_resource_messages_after("nobody", {"t1": 0}) == []


async def test_get_messages_returns_existing_in_seq_order(store: Store) -> None:
    await thread(store)
    saved = await store.save_messages("t1", [Message.user(str(i), id=f"m{i}") for i in range(3)])
    got = await store.get_messages(["m2", "missing", "m0", "m2"])
    assert [m.id for m in got] == ["m0", "m2"]
    assert got == [saved[0], saved[2]]
    assert await store.get_messages([]) == []


async def test_created_at_keeps_timezone(store: Store) -> None:
    await thread(store)
    paris = datetime(2025, 6, 1, 14, 30, 15, 123456, tzinfo=ZoneInfo("Europe/Paris"))
    minus = datetime(2025, 6, 1, 1, 0, tzinfo=timezone(timedelta(hours=-3, minutes=-30)))
    saved = await store.save_messages(
        "t1", [Message.user("p", created_at=paris), Message.user("m", created_at=minus)]
    )
    for listed in (saved, await store.list_messages("t1")):
        assert listed[0].created_at == paris
        assert listed[0].created_at.utcoffset() == timedelta(hours=2)
        assert listed[1].created_at == minus
        assert listed[1].created_at.utcoffset() == timedelta(hours=-3, minutes=-30)


async def test_equal_or_backward_timestamps_keep_insertion_order(store: Store) -> None:
    await thread(store)
    await store.save_messages(
        "t1",
        [
            Message.user("first", created_at=T0),
            Message.user("second", created_at=T0),
            Message.user("third", created_at=T0 - timedelta(days=1)),
        ],
    )
    await store.save_messages("t1", [Message.user("fourth", created_at=T0 - timedelta(days=2))])
    assert texts(await store.list_messages("t1")) == ["first", "second", "third", "fourth"]
    assert texts(await store.list_resource_messages("r1")) == ["first", "second", "third", "fourth"]


async def test_every_part_kind_round_trips(store: Store) -> None:
    await thread(store)
    message = Message(
        role="assistant",
        parts=(
            TextPart(text="héllo ✓"),
            ReasoningPart(text="thinking"),
            ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x", "n": [1, 2]}),
            ToolCallPart(tool_call_id="c2", tool_name="raw", args='{"partial": '),
            ToolResultPart(
                tool_call_id="c1", tool_name="search", result={"hits": [None, 1.5]}, is_error=True
            ),
            FilePart(media_type="image/png", url="https://x/y.png", width=10, height=20, detail="low"),
            DataPart(name="om-observation-start", data={"cycle_id": "c", "nested": {"a": [1]}}),
        ),
        metadata={"source": {"app": "test"}},
    )
    (saved,) = await store.save_messages("t1", [message])
    assert saved.model_copy(update={"seq": None, "thread_id": None, "resource_id": None}) == message
    assert (await store.get_messages([message.id]))[0] == saved


async def test_add_message_parts_appends_and_dedupes(store: Store) -> None:
    await thread(store)
    (saved,) = await store.save_messages("t1", [Message.assistant("answer", id="m1")])
    start = DataPart(name="om-observation-start", data={"cycle_id": "c1"})
    end = DataPart(name="om-observation-end", data={"cycle_id": "c1", "tokens": 5})

    updated = await store.add_message_parts("m1", [start, end])
    assert updated.parts == (*saved.parts, start, end)
    assert updated.seq == saved.seq

    # A retry with a different payload but the same (name, cycle_id) is skipped...
    retried = await store.add_message_parts(
        "m1", [DataPart(name="om-observation-end", data={"cycle_id": "c1"})]
    )
    assert retried.parts == updated.parts
    # ...while another cycle, or another name, is appended.
    other = DataPart(name="om-observation-start", data={"cycle_id": "c2"})
    failed = DataPart(name="om-observation-failed", data={"cycle_id": "c1"})
    final = await store.add_message_parts("m1", [other, failed, other])
    assert final.parts == (*updated.parts, other, failed)
    assert (await store.get_messages(["m1"]))[0] == final

    # Parts without a cycle id are skipped only when an identical part exists.
    signal = DataPart(name="app-signal", data={"n": 1})
    once = await store.add_message_parts("m1", [signal, signal])
    twice = await store.add_message_parts("m1", [signal, DataPart(name="app-signal", data={"n": 2})])
    assert once.parts == (*final.parts, signal)
    assert twice.parts == (*once.parts, DataPart(name="app-signal", data={"n": 2}))


async def test_add_message_parts_unknown_message(store: Store) -> None:
    with pytest.raises(MessageNotFoundError):
        await store.add_message_parts("nope", [DataPart(name="x", data={"cycle_id": "c"})])


async def test_add_message_parts_accepts_only_data_parts(store: Store) -> None:
    await thread(store)
    await store.save_messages("t1", [Message.user("x", id="m1")])
    with pytest.raises(InvalidInputError):
        await store.add_message_parts("m1", [TextPart(text="no")])  # type: ignore[list-item]


async def test_returned_messages_are_copies(store: Store) -> None:
    await thread(store)
    (saved,) = await store.save_messages("t1", [Message.user("x", id="m1", metadata={"k": [1]})])
    saved.metadata["k"].append(2)
    saved.metadata["new"] = True
    (again,) = await store.get_messages(["m1"])
    assert again.metadata == {"k": [1]}
