"""NaN and ±Infinity, which no store keeps as they are (SQLite and PostgreSQL wrote null, the
in-memory store the number), are refused by every store before anything is written: in a
thread's metadata, a message's metadata and a data part's data, saved or appended."""

from __future__ import annotations

import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import Store
from obsmem.types import DataPart, Message, Thread, ToolResultPart

pytestmark = pytest.mark.anyio

NAN = float("nan")


async def test_a_thread_with_a_non_finite_number_is_not_made(store: Store) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await store.create_thread(Thread(id="t1", resource_id="r1", metadata={"a": [{"b": float("inf")}]}))
    assert caught.value.argument == "metadata"
    assert await store.get_thread("t1") is None


async def test_a_thread_is_not_updated_to_hold_one(store: Store) -> None:
    made = await store.create_thread(Thread(id="t1", resource_id="r1", metadata={"n": 1.5}))
    with pytest.raises(InvalidInputError) as caught:
        changed = made.model_copy(update={"metadata": {"n": NAN}})
        await store.update_thread(changed, expected_version=made.version)
    assert caught.value.argument == "metadata"
    assert await store.get_thread("t1") == made


async def test_no_message_of_a_batch_holding_one_is_saved(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    with pytest.raises(InvalidInputError) as caught:
        await store.save_messages("t1", [Message.user("a"), Message.user("b", metadata={"x": float("-inf")})])
    assert caught.value.argument == "messages[1].metadata"
    signal = Message(role="user", parts=(DataPart(name="app-signal", data={"x": (NAN,)}),))
    with pytest.raises(InvalidInputError) as caught:
        await store.save_messages("t1", [signal])
    assert caught.value.argument == "messages[0].parts[0].data"
    assert await store.list_messages("t1") == []


async def test_no_data_part_holding_one_is_appended(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    [saved] = await store.save_messages("t1", [Message.user("a", id="m1")])
    with pytest.raises(InvalidInputError) as caught:
        parts = [DataPart(name="app-ok", data={}), DataPart(name="app-x", data={"x": NAN})]
        await store.add_message_parts("m1", parts)
    assert caught.value.argument == "parts[1].data"
    assert await store.get_messages(["m1"]) == [saved]


async def test_finite_numbers_and_tool_results_are_kept(store: Store) -> None:
    numbers = {"big": 1e308, "small": -0.5, "list": [0.0, -0.0, 2]}
    made = await store.create_thread(Thread(id="t1", resource_id="r1", metadata=numbers))
    assert made.metadata == numbers
    part = ToolResultPart(tool_call_id="c1", tool_name="t", result={"v": 1.5})
    result = Message(role="tool", parts=(part,))
    [saved] = await store.save_messages("t1", [result.model_copy(update={"metadata": numbers})])
    assert saved.metadata == numbers
