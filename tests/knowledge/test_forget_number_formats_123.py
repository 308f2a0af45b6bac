"""Forgetting a phone number forgets it in every form it is written in (helper-123's review):
``forget_value("+49 151 2345678")`` left "their phone number is 0151-234-5678" in the store and let
"call me on 0151 2345678" be written again, since a value was matched by its letters and digits
("491512345678"), which the national form does not hold."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import TombstonedValueError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"


@pytest.fixture(params=["memory", "sqlite"])
async def kstore(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[KnowledgeStore]:
    store: KnowledgeStore
    if request.param == "memory":
        store = InMemoryKnowledgeStore(clock=FakeClock())
    else:
        store = SQLiteKnowledgeStore(tmp_path / "knowledge.db", clock=FakeClock())
    async with store:
        yield store


@pytest.mark.parametrize("forgotten", ["+49 151 2345678", "0151 2345678", "0049-151-234-56-78"])
async def test_a_forgotten_number_goes_in_every_form(kstore: KnowledgeStore, forgotten: str) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    alice = await knowledge.node("Alice", "person", RES)
    forms = ["their phone number is 0151-234-5678", "their mobile is +49 (0)151 234 56 78",
             "reach them at 0049 151 2345678", "office line (0151) 2345678"]
    records = [await knowledge.append(alice.id, text, RES, reason="said") for text in forms]
    other = await knowledge.append(alice.id, "their fax is +49 151 2345679", RES, reason="said")

    await kstore.forget_value(forgotten, RES, actor="alice", reason="asked to be forgotten")

    left = [r.text for r in records if await kstore.load_record(r.id) is not None]
    assert left == []
    assert await kstore.load_record(other.id) is not None
    for text in ["call me on 0151 2345678", "my number: +49 151 234 5678"]:
        with pytest.raises(TombstonedValueError):
            await knowledge.append(alice.id, text, RES, reason="said")
    await knowledge.append(alice.id, "my number: +49 151 234 5670", RES, reason="said")


async def test_a_forgotten_id_with_leading_zeros_is_not_read_as_a_phone_number(kstore: KnowledgeStore) -> None:
    """"0012345678" could be 00 + "1 234 5678"; forgotten as written (an order id), it must not
    take every text holding "2345678" with it."""
    knowledge = Knowledge(kstore, actor="tester")
    alice = await knowledge.node("Alice", "person", RES)
    order = await knowledge.append(alice.id, "their order 0012345678 was late", RES, reason="said")
    locker = await knowledge.append(alice.id, "their locker code is 92345678", RES, reason="said")
    await kstore.forget_value("0012345678", RES, actor="alice", reason="asked to be forgotten")
    assert await kstore.load_record(order.id) is None
    assert await kstore.load_record(locker.id) is not None
