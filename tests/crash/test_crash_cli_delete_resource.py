"""``obsmem delete-resource alice`` run again after the app was SIGKILLed inside a
``delete_resource`` of alice, once the rows of both her threads had gone: the command finishes
the delete (her working memory and the erase notes go), then told the user the store "holds no
thread of resource 'alice' (check the id)", as if they had mistyped it and nothing had happened."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from obsmem import Memory

from .crash_child import config
from .harness import env, kill_at
from .test_crash_erase import tables_holding

pytestmark = pytest.mark.anyio


async def test_delete_resource_again_says_it_finished_the_cut_off_delete(tmp_path: Path) -> None:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at("delete-resource:last-drop-data", db, tmp_path / "run")
    async with Memory(f"sqlite:///{db}", config=config(buffered=False)) as memory:
        assert await memory.list_threads(resource_id="alice") == []  # both rows went before the kill
        assert [t.id for t in await memory.unfinished_deletes("alice")] == ["t1", "t2"]
    assert tables_holding(db, "alice")  # and what the kill left of her: working memory, erase notes

    done = subprocess.run([sys.executable, "-m", "obsmem", "delete-resource", "alice", "--store", str(db), "--yes"],
                          capture_output=True, text=True, env={**env(), "COLUMNS": "200"}, timeout=120)

    assert done.returncode == 0, done.stderr
    assert tables_holding(db, "alice") == {}
    said = " ".join(done.stdout.split())
    assert "check the id" not in said, said
    assert "finished the delete of 2 threads cut off earlier" in said, said


async def test_delete_resource_of_an_unknown_id_still_says_to_check_it(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with Memory(f"sqlite:///{db}", config=config(buffered=False)) as memory:
        await memory.create_thread("t1", "alice")

    done = subprocess.run([sys.executable, "-m", "obsmem", "delete-resource", "alcie", "--store", str(db), "--yes"],
                          capture_output=True, text=True, env={**env(), "COLUMNS": "200"}, timeout=120)

    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "holds no thread of resource 'alcie' (check the id)" in said, said
    assert "cut off" not in said
