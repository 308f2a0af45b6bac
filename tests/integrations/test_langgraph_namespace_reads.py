"""LangGraph store: a get or put of one item reads that item's records, not the namespace's.

Each ``aget``/``aput`` read every record about the namespace's node (a page of the node at a time),
and the visibility check of each record read that node's records of the record's attribute again:
quadratic in the namespace's size (400 items: one ``aget`` 0.72 s on SQLite, 400 puts about four
minutes; found by helper 215). Measured here by the records the store's tables hand out, not by
time: a get reads the item's own timeline (and the few rows of its node), whatever the namespace
holds; a listing reads the timelines once per page, not once per record."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.memory import MemoryKnowledgeTables
from obsmem.knowledge.store.sql_tables import SqlKnowledgeTables

pytestmark = pytest.mark.anyio

SCOPE = "org:acme/resource:alice/thread:t1"
READS = ("records_about_page", "attribute_records", "attributes_records", "records_about")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    if request.param == "postgres":
        made = Knowledge.postgres(request.getfixturevalue("postgres_url"))
    else:
        made = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with made as opened:
        yield opened


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the knowledge tables return from their record reads (``[0]``), and the reads by
    attribute (``[1]``: each scanned the node's records on SQL), counted (any store)."""
    tally = [0, 0]

    def counted(method: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
        def wrapper(*args: Any, **kwargs: Any) -> list[Any]:
            found = method(*args, **kwargs)
            tally[0] += len(found)
            tally[1] += "attribute" in method.__name__
            return found

        return wrapper

    for tables in (MemoryKnowledgeTables, SqlKnowledgeTables):
        for name in READS:
            if hasattr(tables, name):
                monkeypatch.setattr(tables, name, counted(getattr(tables, name)))
    return tally


async def _filled(knowledge: Knowledge, n: int) -> KnowledgeBaseStore:
    store = KnowledgeBaseStore(knowledge, scope=SCOPE)
    for i in range(n):
        await store.aput(("memories",), f"note-{i}", {"text": f"note number {i}"})
    await store.aput(("memories",), "note-5", {"text": "note five, changed"})
    return store


async def test_a_get_and_a_put_read_the_items_records_only(knowledge: Knowledge, rows: list[int]) -> None:
    store = await _filled(knowledge, 300)
    rows[0] = 0
    item = await store.aget(("memories",), "note-5")
    assert item is not None and item.value == {"text": "note five, changed"}
    assert rows[0] <= 10, f"one get read {rows[0]} records of a 300-item namespace"
    rows[0] = 0
    await store.aput(("memories",), "note-7", {"text": "note seven, changed"})
    assert rows[0] <= 10, f"one put read {rows[0]} records of a 300-item namespace"
    changed, kept = await store.aget(("memories",), "note-7"), await store.aget(("memories",), "note-8")
    assert changed is not None and changed.value == {"text": "note seven, changed"}
    assert kept is not None and kept.value == {"text": "note number 8"}
    await store.adelete(("memories",), "note-7")
    assert await store.aget(("memories",), "note-7") is None


async def test_a_listing_reads_each_timeline_once_a_page(knowledge: Knowledge, rows: list[int]) -> None:
    store = await _filled(knowledge, 300)
    rows[:] = [0, 0]
    items = await store.asearch(("memories",), limit=1000)
    assert len(items) == 300
    assert {i.key: i.value["text"] for i in items}["note-5"] == "note five, changed"
    # the node's records once (a page at a time) and their timelines once a page: about 2 x 301,
    # where a timeline read a record was 301 x 301
    assert rows[0] <= 4 * 301, f"a listing of 300 items read {rows[0]} records"
    assert rows[1] <= 10, f"a listing of 300 items read the node by attribute {rows[1]} times"
