"""An import's work follows the size of the file it reads (helper-120's hostile review).

* A resource with many threads, each with its working memory: checking the working-memory keys
  rebuilt the set of the export's thread keys for every working-memory line, so the check alone
  grew with the square of the threads (counted with tests/integrity/work_count.py, not timed).
* A hand-edited (or forged) export whose later generation claims ``version`` 10 000 000: the
  import reaches an exported version by compare-and-set writes of the same content, one write a
  version, so one line of the file asked for ten million writes (over REST, any key that may
  import could keep a replica's store busy for hours). It is refused by its line now, before
  anything is written.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from obsmem.errors import ExportFormatError, ImportConflictError
from obsmem.storage import ObservationRecord, lineage_key, open_store
from obsmem.storage.contract import WriteResult
from obsmem.storage.memory import MemoryStore
from obsmem.transfer import export_resource, import_resource
from obsmem.types import Thread
from tests.integrity.work_count import GROWTH_BOUND, growth


async def _export_many_threads(n: int) -> str:
    async with open_store("memory://") as store:
        for i in range(n):
            await store.create_thread(Thread(id=f"t{i}", resource_id="alice"))
            await store.set_working_memory(f"thread:t{i}", f"- note {i}")
        out = io.StringIO()
        await export_resource(store, "alice", out)
        return out.getvalue()


def _many_threads(n: int) -> str:
    return asyncio.run(_export_many_threads(n))


async def _import_checked(text: str) -> None:
    """The whole file read and checked; the target then refuses it (it holds alice already)."""
    async with open_store("memory://") as store:
        await store.create_thread(Thread(id="other", resource_id="alice"))
        with pytest.raises(ImportConflictError):
            await import_resource(store, io.StringIO(text))


def test_checking_many_threads_working_memory_is_linear() -> None:
    """On main: 12.1× the work for 4× the threads (300 → 1200 threads with working memory)."""
    ratio = growth(lambda text: asyncio.run(_import_checked(text)), _many_threads, 300)
    assert ratio < GROWTH_BOUND, ratio


class _CountingStore(MemoryStore):
    """Counts the import's compare-and-set writes; stops one that would not end."""

    def __init__(self) -> None:
        super().__init__()
        self.updates = 0

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        self.updates += 1
        if self.updates > 20_000:
            raise RuntimeError(f"{self.updates} record writes for one import and counting")
        return await super().update_record(record, expected_version=expected_version)


async def _export_two_generations(tmp_path: Path) -> list[dict[str, Any]]:
    lineage = lineage_key("thread", "t1", "alice")
    async with open_store("memory://") as store:
        await store.create_thread(Thread(id="t1", resource_id="alice"))
        first = ObservationRecord(id="g0", lineage=lineage, scope="thread", thread_id="t1", resource_id="alice")
        made = await store.create_record(first)
        assert made.applied and made.record is not None
        second = ObservationRecord(
            id="g1", lineage=lineage, scope="thread", thread_id="t1", resource_id="alice", generation=1,
            origin="reflection", active_observations="- the user likes tea",
        )  # fmt: skip
        result = await store.create_generation(made.record, second, expected_version=made.record.version)
        assert result.applied
        out = io.StringIO()
        await export_resource(store, "alice", out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.anyio
async def test_a_forged_version_is_refused_by_its_line_not_written_up_to(tmp_path: Path) -> None:
    """On main: RuntimeError '20001 record writes for one import and counting' (the import was
    writing the record again and again towards version 10 000 000)."""
    items = await _export_two_generations(tmp_path)
    (number, line), *_ = [(n, item) for n, item in enumerate(items, 1) if item.get("kind") == "record"
                          and item["data"]["id"] == "g1"]  # fmt: skip
    line["data"]["version"] = 10_000_000
    forged = "".join(json.dumps(item) + "\n" for item in items)
    store = _CountingStore()
    async with store:
        with pytest.raises(ExportFormatError, match=f"line {number}") as raised:
            await import_resource(store, io.StringIO(forged))
        assert "version" in str(raised.value)
        assert store.updates == 0
        assert await store.list_threads("alice") == []


@pytest.mark.anyio
async def test_an_exported_version_is_still_reached_exactly(tmp_path: Path) -> None:
    """The bound leaves real files exact: a later generation at version 40 comes back at 40."""
    items = await _export_two_generations(tmp_path)
    for item in items:
        if item.get("kind") == "record" and item["data"]["id"] == "g1":
            item["data"]["version"] = 40
    async with open_store("memory://") as store:
        await import_resource(store, io.StringIO("".join(json.dumps(item) + "\n" for item in items)))
        head = await store.get_head(lineage_key("thread", "t1", "alice"))
        assert head is not None and head.id == "g1" and head.version == 40
