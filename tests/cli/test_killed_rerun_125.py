"""A SIGKILLed ``obsmem delete-resource`` or ``obsmem import`` leaves its lease row behind (until
it expires, or is purged an hour on); run again at once on the same host, the command tells the
dead process's lease from a live one (``leasing.ended_here``) and finishes the work, instead of
refusing for up to the lease's TTL. Both are the real commands in real processes.

    python test_killed_rerun_125.py import <export file> <sqlite file> <folder>   (the child)
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REACH_TIMEOUT_S = 180.0


def _import_child(export: str, db: str, folder: Path) -> None:
    """The real ``obsmem import``, stopped for good inside its second message save (threads and
    some messages written, its import lease held)."""
    from obsmem.cli import main
    from obsmem.storage import SQLiteStore

    real = SQLiteStore.save_messages
    calls = 0

    async def save(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            (folder / "at").write_text("import")
            while True:
                await asyncio.sleep(3600)
        return await real(self, *args, **kwargs)

    SQLiteStore.save_messages = save  # type: ignore[method-assign]
    sys.argv = ["obsmem", "import", export, "--store", db]
    main()


if __name__ == "__main__":
    _import_child(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
    raise SystemExit(0)


import pytest  # noqa: E402

from obsmem import Memory, Message  # noqa: E402
from obsmem.storage import SQLiteStore  # noqa: E402
from obsmem.transfer import export_resource  # noqa: E402
from tests.crash.harness import env  # noqa: E402

pytestmark = pytest.mark.anyio
DELETE_CHILD = Path(__file__).with_name("delete_under_way_child_117.py")


async def _alice(db: Path) -> None:
    async with Memory(f"sqlite:///{db}") as memory:
        for thread in ("t1", "t2"):
            await memory.create_thread(thread, "alice")
            await memory.save_messages(thread, [Message.user(f"Hello from {thread}"), Message.assistant("Hi.")])


def _killed_at_its_point(command: list[str], folder: Path) -> None:
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + REACH_TIMEOUT_S  # a bounded wait for its point, not an assertion on time
        while not (folder / "at").exists():
            if child.poll() is not None:
                raise AssertionError(f"the child exited {child.returncode}: {child.communicate()[1][-4000:]}")
            assert time.monotonic() < deadline, "the child never reached its point"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == -signal.SIGKILL


def _obsmem(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "obsmem", *args], capture_output=True, text=True,
                          env={**env(), "COLUMNS": "200"}, timeout=120)  # fmt: skip
    return done.returncode, " ".join((done.stdout + done.stderr).split())


async def _leases(db: Path, prefix: str) -> list[str]:
    store = SQLiteStore(db)
    try:
        return [lease.key for lease in await store.list_leases(prefix)]
    finally:
        await store.close()


async def test_a_killed_delete_resource_is_finished_by_the_next_run_at_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    await _alice(db)
    _killed_at_its_point([sys.executable, str(DELETE_CHILD), str(db), str(tmp_path)], tmp_path)
    assert await _leases(db, "erasing:")  # the dead run's marks are still there, unexpired

    code, said = _obsmem("delete-resource", "alice", "--store", str(db), "--yes")

    assert code == 0, said
    assert "under way" not in said and "finished the delete of 2 threads cut off earlier" in said, said
    async with Memory(f"sqlite:///{db}") as memory:
        assert await memory.unfinished_deletes("alice") == []


async def test_a_killed_import_is_run_again_at_once(tmp_path: Path) -> None:
    source, db, export = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "alice.jsonl"
    await _alice(source)
    store = SQLiteStore(source)
    try:
        await export_resource(store, "alice", export)
    finally:
        await store.close()
    _killed_at_its_point([sys.executable, __file__, "import", str(export), str(db), str(tmp_path)], tmp_path)
    assert await _leases(db, "importing:")  # the dead run's lease is still there, unexpired

    code, said = _obsmem("import", str(export), "--store", str(db))

    assert code == 0, said
    assert "imported resource 'alice'" in said and "2 threads" in said, said
    target = SQLiteStore(db)
    try:
        assert [len(await target.list_messages(t)) for t in ("t1", "t2")] == [2, 2]
    finally:
        await target.close()
