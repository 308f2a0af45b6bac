"""NaN, Infinity and -Infinity in thread metadata, message metadata and a data part's data are
refused with an InvalidInputError naming the field, before anything is stored, the same on every
store: they are no JSON number, so SQLite and PostgreSQL stored them as null (the caller's data
silently changed) while the in-memory store kept them."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import InvalidInputError, Memory, Message, SyncMemory
from obsmem.types import DataPart

pytestmark = pytest.mark.anyio

NON_FINITE = [float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("number", NON_FINITE, ids=["nan", "inf", "-inf"])
async def test_a_non_finite_number_in_thread_metadata_is_refused_naming_metadata(
    memory: Memory, number: float
) -> None:
    for metadata in ({"score": number}, {"scores": [1.5, {"deep": (number,)}]}):
        with pytest.raises(InvalidInputError) as caught:
            await memory.create_thread("t1", "u1", metadata=metadata)
        assert caught.value.argument == "metadata", caught.value
        assert await memory.list_threads("u1") == [], "no thread is made"


@pytest.mark.parametrize("number", NON_FINITE, ids=["nan", "inf", "-inf"])
async def test_a_non_finite_number_in_a_message_is_refused_naming_the_field(
    memory: Memory, number: float
) -> None:
    await memory.create_thread("t1", "u1")
    in_metadata = Message.user("b", metadata={"score": [number]})
    in_data = Message(role="user", parts=(DataPart(name="app-signal", data={"limit": {"x": number}}),))
    with pytest.raises(InvalidInputError) as caught:
        await memory.save_messages("t1", [Message.user("a"), in_metadata])
    assert caught.value.argument == "messages[1].metadata", caught.value
    with pytest.raises(InvalidInputError) as caught:
        await memory.save_messages("t1", [in_data])
    assert caught.value.argument == "messages[0].parts[0].data", caught.value
    with pytest.raises(InvalidInputError) as caught:
        await memory.begin_turn(thread_id="t2", resource_id="u1", messages=[in_metadata])
    assert caught.value.argument == "messages[0].metadata", caught.value
    assert await memory.list_messages("t1") == [], "nothing of a refused batch is saved"
    assert [t.id for t in await memory.list_threads("u1")] == ["t1"], "the turn made no thread"

    turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("hi")])
    with pytest.raises(InvalidInputError) as caught:
        await turn.end([Message.assistant("ok", metadata={"cost": number})])
    assert caught.value.argument == "responses[0].metadata", caught.value
    assert [m.text for m in await memory.list_messages("t1")] == ["hi"]


async def test_finite_numbers_are_kept_as_they_are(memory: Memory) -> None:
    numbers = {"big": 1e308, "small": -0.5, "whole": 3, "none": None}
    await memory.create_thread("t1", "u1", metadata=numbers)
    assert (await memory.get_thread("t1")).metadata == numbers
    signal = Message(role="user", parts=(DataPart(name="app-x", data=numbers),))
    await memory.save_messages("t1", [Message.user("a", metadata=numbers), signal])
    first, second = await memory.list_messages("t1")
    assert first.metadata == numbers
    assert isinstance(second.parts[0], DataPart) and second.parts[0].data == numbers


def test_sync_memory_refuses_them_too(tmp_path: Path) -> None:
    with SyncMemory(f"sqlite:///{tmp_path / 'om.db'}") as memory:
        with pytest.raises(InvalidInputError) as caught:
            memory.create_thread("t1", "u1", metadata={"score": float("nan")})
        assert caught.value.argument == "metadata"
        memory.create_thread("t1", "u1")
        with pytest.raises(InvalidInputError) as caught:
            memory.save_messages("t1", [Message.user("a", metadata={"score": float("inf")})])
        assert caught.value.argument == "messages[0].metadata"
        assert memory.list_messages("t1") == []
