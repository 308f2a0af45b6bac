"""``obsmem delete-resource alice`` run while the application itself was deleting alice
(``Memory.delete_resource``, its threads' rows gone, the rest not yet) said it had "finished the
delete of 2 threads cut off earlier (its process stopped midway)" and ran a second delete beside
the live one: only the CLI's and the REST API's deletes marked themselves under way (7e635ac).
``Memory``'s deletes now do, so every delete does."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from obsmem import Memory
from tests.cli.test_delete_under_way_117 import REACH_TIMEOUT_S, _alice, _cli
from tests.crash.harness import env

pytestmark = pytest.mark.anyio
CHILD = Path(__file__).with_name("app_delete_child.py")


async def test_an_applications_delete_under_way_is_not_called_cut_off(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    await _alice(db)
    child = subprocess.Popen([sys.executable, str(CHILD), str(db), str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + REACH_TIMEOUT_S  # a bounded wait for its point, not an assertion on time
        while not (tmp_path / "at").exists():
            if child.poll() is not None:
                raise AssertionError(f"the app's delete exited {child.returncode}: {child.communicate()[1][-4000:]}")
            assert time.monotonic() < deadline, "the app's delete never reached its point"
            time.sleep(0.01)
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
