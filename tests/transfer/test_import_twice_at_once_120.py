"""Two imports of one export at the same time (a retried request, a second click) leave it
imported once (helper-120's hostile review).

Both checked the target before either wrote, so both went on: the second took the first's
threads for its own (same ids, same creation time), its observation record was refused
("stale": another writer), and taking back what it "wrote" deleted the first import's threads,
messages and observations, while the first reported success. Now an import holds the resource's
import lease while it runs; the second is refused (``ImportConflictError``) before it writes or
takes back anything.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from obsmem import Message
from obsmem.errors import ImportConflictError
from obsmem.storage import ObservationRecord, SQLiteStore, lineage_key, open_store
from obsmem.transfer import ImportSummary, export_resource, import_resource
from obsmem.types import Thread

pytestmark = pytest.mark.anyio

LINEAGE = lineage_key("thread", "t1", "alice")


async def _export() -> str:
    async with open_store("memory://") as source:
        for thread in ("t1", "t2"):
            await source.create_thread(Thread(id=thread, resource_id="alice"))
            await source.save_messages(thread, [Message.user(f"hello from {thread}")])
        made = await source.create_record(
            ObservationRecord(id="r1", lineage=LINEAGE, scope="thread", thread_id="t1", resource_id="alice",
                              active_observations="- the user said hello")
        )  # fmt: skip
        assert made.applied
        out = io.StringIO()
        await export_resource(source, "alice", out)
        return out.getvalue()


class _BothChecking(SQLiteStore):
    """Holds each import at its check of the target until the other one is there too (or done)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.arrived = 0
        self.gate = asyncio.Event()

    async def list_threads(self, resource_id: str, *args: object, **kwargs: object) -> list[Thread]:
        self.arrived += 1
        if self.arrived >= 2:
            self.gate.set()
        await self.gate.wait()
        return await super().list_threads(resource_id, *args, **kwargs)  # type: ignore[arg-type]


async def test_two_imports_at_once_leave_the_user_imported_once(tmp_path: Path) -> None:
    """On main: one import returned its summary (2 threads, 2 messages, 1 record) and the other
    raised StorageError "... 'r1' (stale) ...", and the store held no thread of alice after both."""
    text = await _export()
    async with _BothChecking(tmp_path / "m.db") as store:

        async def one() -> ImportSummary:
            try:
                return await import_resource(store, io.StringIO(text))
            finally:
                store.gate.set()  # (a refused one lets the other go on)

        results = await asyncio.gather(one(), one(), return_exceptions=True)
        done = [r for r in results if isinstance(r, ImportSummary)]
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(done) == 1 and len(refused) == 1, results
        assert isinstance(refused[0], ImportConflictError) and "under way" in str(refused[0])
        assert sorted(t.id for t in await SQLiteStore.list_threads(store, "alice")) == ["t1", "t2"]
        assert len(await store.list_messages("t1")) == 1
        head = await store.get_head(LINEAGE)
        assert head is not None and head.id == "r1"
        assert await store.list_leases("importing:") == []  # released when done
