"""What no knowledge store can keep is refused the same way on every adapter, as an obsmem
InvalidInputError naming what is wrong, before anything is written (helper-123's hostile review).

Before: a record text or node name holding a lone surrogate ("\\udcff", what a bad decode with
surrogateescape leaves) was stored by the in-memory adapter (an export of it could not be written
as UTF-8 later) and refused by SQLite with pydantic's PydanticSerializationError, not an obsmem
error; metadata nested 5,000 levels deep raised RecursionError (in memory) or
PydanticSerializationError (SQLite); a NaN in metadata was stored (PostgreSQL's jsonb refuses
it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge, RecordDraft

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Knowledge]:
    made = Knowledge.in_memory(actor="t") if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db", actor="t")
    async with made:
        yield made


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


async def test_a_lone_surrogate_is_refused(knowledge: Knowledge) -> None:
    node = await knowledge.node("Alice", "person", RES)
    with pytest.raises(InvalidInputError, match="surrogate"):
        await knowledge.append(node.id, "Alice likes \udcff tea", RES, reason="said")
    with pytest.raises(InvalidInputError, match="surrogate"):
        await knowledge.node("Bob\ud800", "person", RES)
    with pytest.raises(InvalidInputError, match="surrogate"):
        await knowledge.store.append_record(RecordDraft(node.id, "fine", RES, metadata={"k\udcff": 1}),
                                            actor="t", reason="r")
    assert (await knowledge.store.list_about(node.id, RES)).items == []
    # an emoji (a surrogate pair in JSON, one character here) is fine
    await knowledge.append(node.id, "Alice likes 🍵", RES, reason="said")


async def test_metadata_nested_too_deeply_or_not_a_json_number_is_refused(knowledge: Knowledge) -> None:
    node = await knowledge.node("Alice", "person", RES)
    for metadata in (nested(5_000), {"v": float("nan")}, {"v": [float("inf")]}):
        with pytest.raises(InvalidInputError) as refused:
            await knowledge.store.append_record(RecordDraft(node.id, "fact", RES, metadata=metadata),
                                                actor="t", reason="r")
        assert refused.value.argument == "metadata"
    with pytest.raises(InvalidInputError):
        await knowledge.store.create_node("Deep", "thing", RES, actor="t", reason="r", metadata=nested(5_000))
    assert (await knowledge.store.list_about(node.id, RES)).items == []
    kept = await knowledge.store.append_record(RecordDraft(node.id, "fact", RES, metadata=nested(20)),
                                               actor="t", reason="r")
    assert kept.metadata["x"]["x"] == nested(18)
