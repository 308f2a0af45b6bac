"""``obsmem import`` SIGKILLed midway (its threads and some of its messages written), then run
again.

Found by hostile review 111: an import is all or nothing while its process lives (a failure
takes back what it wrote), but killed midway what it had written stayed (threads, some messages,
no observations) and every later import of the user was refused as a conflict ("the store already
holds threads of resource 'alice'; nothing was imported"): the user was left half imported. An
import now notes what it writes before its first write and removes the note when done; the next
import of that resource takes back what a cut-off one left first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from obsmem import ImportConflictError, Message
from obsmem.storage import SQLiteStore
from obsmem.transfer import import_resource

from .harness import env, kill_at

pytestmark = pytest.mark.anyio


def exported_messages(run: Path) -> list[str]:
    lines = [json.loads(line) for line in (run / "alice.jsonl").read_text().splitlines()]
    return [line["data"]["id"] for line in lines if line.get("kind") == "message"]


def cut_off(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    run = tmp_path / "run"
    kill_at("import", db, run)
    return db, run


async def test_an_import_killed_midway_can_be_run_again(tmp_path: Path) -> None:
    db, run = cut_off(tmp_path)

    store = SQLiteStore(db)
    try:
        assert await store.list_threads("alice")  # half imported
        await import_resource(store, run / "alice.jsonl")  # the user runs the import again
        stored = [m.id for t in ("t1", "t2") for m in await store.list_messages(t)]
        assert sorted(stored) == sorted(exported_messages(run))  # every message of the export, once
        assert await store.get_head("thread:t1") is not None  # and the observations
        assert await store.get_working_memory("obsmem:importing:alice") is None
    finally:
        await store.close()


async def test_the_cli_import_run_again_finishes(tmp_path: Path) -> None:
    db, run = cut_off(tmp_path)

    again = subprocess.run([sys.executable, "-m", "obsmem", "import", str(run / "alice.jsonl"), "--store", str(db)],
                           capture_output=True, text=True, env=env(), timeout=120)

    assert again.returncode == 0, again.stderr
    store = SQLiteStore(db)
    try:
        assert len(await store.list_messages("t1")) + len(await store.list_messages("t2")) == len(exported_messages(run))
    finally:
        await store.close()


async def test_a_cut_off_import_whose_threads_were_used_since_is_not_taken_back(tmp_path: Path) -> None:
    """The app went on with the half-imported user: its new messages are never deleted by an import."""
    db, run = cut_off(tmp_path)
    store = SQLiteStore(db)
    try:
        await store.save_messages("t1", [Message.user("a message written after the crash")])
        before = [m.id for m in await store.list_messages("t1")]

        with pytest.raises(ImportConflictError, match="cut off midway"):
            await import_resource(store, run / "alice.jsonl")

        assert [m.id for m in await store.list_messages("t1")] == before
    finally:
        await store.close()


async def test_deleting_a_user_whose_import_was_cut_off_leaves_nothing_of_them(tmp_path: Path) -> None:
    """The user is deleted instead of imported again: the import's note (under their id, listing
    their threads) goes with them, as everything else of theirs does."""
    from obsmem import Memory

    from .test_crash_erase import tables_holding

    db, _ = cut_off(tmp_path)
    async with Memory(f"sqlite:///{db}") as memory:
        counts = await memory.delete_resource("alice")
        assert counts["threads"] >= 1
    assert tables_holding(db, "alice") == {}
