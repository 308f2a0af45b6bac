"""An import never lands in a user whose delete is unfinished (helper-120's hostile review).

A ``Memory.delete_resource`` cut off midway (the process killed) after its threads' rows went
left the rest of the user to delete (the resource's lineage, its knowledge, ...), and notes
saying so: ``memory.unfinished_deletes`` names the threads, and the README says the same call
again finishes it. ``obsmem import`` of the user's earlier export found no threads and wrote it
all back: the user who asked to be deleted was back, next to the parts of them the delete had
not reached yet, and finishing the delete as the README says would now delete the import too.
It is refused now (``ImportConflictError`` naming the unfinished delete), nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli.app import app
from obsmem.errors import ImportConflictError
from obsmem.storage import SQLiteStore, lineage_key
from obsmem.transfer import export_resource, import_resource

pytestmark = pytest.mark.anyio


class _KilledAtTheResourceLineage(SQLiteStore):
    """The delete's process 'dies' when it reaches the resource's own lineage (every thread row
    and thread lineage is gone by then)."""

    async def delete_lineage(self, lineage: str) -> int:
        if lineage == lineage_key("resource", None, "alice"):
            raise KeyboardInterrupt("killed midway")
        return await super().delete_lineage(lineage)


async def _exported_then_cut_off(db: Path, export: Path) -> None:
    async with _KilledAtTheResourceLineage(db) as store:
        memory = Memory(store)
        for thread in ("t1", "t2"):
            await memory.create_thread(thread, resource_id="alice")
            await memory.save_messages(thread, [Message.user(f"hello from {thread}")])
        await export_resource(store, "alice", export)
        with pytest.raises(KeyboardInterrupt):
            await memory.delete_resource("alice")
        assert await store.list_threads("alice") == []
        assert sorted(t.id for t in await memory.unfinished_deletes("alice")) == ["t1", "t2"]
        await memory.aclose()


async def test_import_into_a_user_whose_delete_is_unfinished_is_refused(tmp_path: Path) -> None:
    """On main: the import succeeded (2 threads, 2 messages back in the store) while
    unfinished_deletes('alice') still listed t1 and t2."""
    db, export = tmp_path / "m.db", tmp_path / "alice.jsonl"
    await _exported_then_cut_off(db, export)
    async with SQLiteStore(db) as store:
        with pytest.raises(ImportConflictError, match="delete"):
            await import_resource(store, export)
        assert await store.list_threads("alice") == []
        memory = Memory(store)
        await memory.delete_resource("alice")  # finished as the README says
        assert await memory.unfinished_deletes("alice") == []
        summary = await import_resource(store, export)  # and then it imports
        assert summary.counts == {"thread": 2, "message": 2}
        await memory.aclose()


def test_the_cli_refuses_it_in_one_line(tmp_path: Path) -> None:
    """On main: exit 0, "imported resource 'alice' ...: 2 threads, 2 messages"."""
    import anyio

    db, export = tmp_path / "m.db", tmp_path / "alice.jsonl"
    anyio.run(_exported_then_cut_off, db, export)
    result = CliRunner().invoke(app, ["import", str(export), "--store", str(db)])
    assert result.exit_code == 1, result.output
    assert "delete" in result.output and "imported resource" not in result.output


async def test_an_export_moved_into_another_user_is_not_held_up(tmp_path: Path) -> None:
    db, export = tmp_path / "m.db", tmp_path / "alice.jsonl"
    await _exported_then_cut_off(db, export)
    async with SQLiteStore(db) as store:
        # thread ids t1, t2 are free again (their rows went); carol has no delete under way
        summary = await import_resource(store, export, into_resource="carol")
        assert summary.resource_id == "carol" and summary.counts == {"thread": 2, "message": 2}
