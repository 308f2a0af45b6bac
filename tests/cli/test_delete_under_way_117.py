"""``obsmem delete-resource alice`` run while another process's delete of alice was still under
way (its threads' rows gone, the rest not yet) told the user it had "finished the delete of 2
threads cut off earlier (its process stopped midway)": a live delete taken for a dead one, and
run a second time alongside it. A delete from the command line (or the REST API) now marks itself
under way with a lease of its own, renewed while it runs; another run seeing one says so and
deletes nothing. A delete cut off by a kill holds no lease (or one that expires within
``ERASING_TTL_S``): it is finished and called cut off, as before (tests/crash)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from obsmem import Memory, Message
from tests.crash.harness import env

pytestmark = pytest.mark.anyio
CHILD = Path(__file__).with_name("delete_under_way_child_117.py")
REACH_TIMEOUT_S = 180.0


async def _alice(db: Path) -> None:
    async with Memory(f"sqlite:///{db}") as memory:
        for thread in ("t1", "t2"):
            await memory.create_thread(thread, "alice")
            await memory.save_messages(thread, [Message.user(f"Hello from {thread}"), Message.assistant("Hi.")])


def _cli(db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "obsmem", "delete-resource", "alice", "--store", str(db), "--yes"],
                          capture_output=True, text=True, env={**env(), "COLUMNS": "200"}, timeout=120)


async def cli_beside_a_delete_under_way(tmp_path: Path, *mode: str) -> None:
    """``obsmem delete-resource alice`` run while another process's delete of alice (the CLI's,
    or with ``app`` an application's) is held midway: told apart from a cut-off one."""
    db = tmp_path / "m.db"
    await _alice(db)
    child = subprocess.Popen([sys.executable, str(CHILD), str(db), str(tmp_path), *mode],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + REACH_TIMEOUT_S  # a bounded wait for its point, not an assertion on time
        while not (tmp_path / "at").exists():
            if child.poll() is not None:
                raise AssertionError(f"the first delete exited {child.returncode}: {child.communicate()[1][-4000:]}")
            assert time.monotonic() < deadline, "the first delete never reached its point"
            time.sleep(0.01)
        async with Memory(f"sqlite:///{db}") as memory:  # what the user sees: both threads gone, notes left
            assert await memory.list_threads(resource_id="alice") == []
            assert [t.id for t in await memory.unfinished_deletes("alice")] == ["t1", "t2"]
        done = _cli(db)
    finally:
        child.kill()
        child.communicate()
    said = " ".join((done.stdout + done.stderr).split())
    assert "cut off" not in said, said
    assert "another delete of resource 'alice' is under way" in said, said
    assert done.returncode == 1, said
    async with Memory(f"sqlite:///{db}") as memory:  # this run deleted nothing of it
        assert [t.id for t in await memory.unfinished_deletes("alice")] == ["t1", "t2"]


async def test_a_delete_under_way_in_another_process_is_not_called_cut_off(tmp_path: Path) -> None:
    await cli_beside_a_delete_under_way(tmp_path)


async def test_a_finished_delete_leaves_nothing_that_looks_under_way(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    await _alice(db)
    first = _cli(db)
    assert first.returncode == 0, first.stderr
    assert "deleted resource 'alice'" in " ".join(first.stdout.split())
    again = _cli(db)
    said = " ".join((again.stdout + again.stderr).split())
    assert again.returncode == 0 and "under way" not in said, said
    assert "holds no thread of resource 'alice' (check the id)" in said, said
    async with Memory(f"sqlite:///{db}") as memory:
        assert await memory.store.list_leases() == []
