"""Two ``obsmem delete-resource alice`` started at the same instant: one deletes, the other says a
delete is under way, and after both alice is gone.

On main each run marked itself under way (its erasing lease), then looked for another delete's
lease: run at the same instant, each saw the other's and both refused ("another delete of
resource 'alice' is under way ... this run deleted nothing"), so nothing was deleted. The same
instant is made certain here, not left to timing: each run is the real command in its own
process, held right after it marked itself under way until the other has too (the file
barrier below), then let go.

    python test_delete_at_once_125.py <sqlite file> <coordination folder> <name>   (the child)
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

BARRIER_TIMEOUT_S = 120.0


def _barrier(folder: Path, name: str, step: str) -> None:
    """Wait until both runs reached ``step`` (a bounded wait: a run that never comes fails the test)."""
    (folder / f"{step}-{name}").write_text(step)
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(list(folder.glob(f"{step}-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)


def _child(db: str, folder: Path, name: str) -> None:
    """The real ``obsmem delete-resource alice --yes``, held twice: once marked under way, until
    both runs are; once it has looked for the other's mark, until both have."""
    from obsmem.cli import main
    from obsmem.storage import leasing

    real_erasing, real_elsewhere = leasing.erasing, leasing.erasing_elsewhere
    held = set()

    @contextlib.asynccontextmanager
    async def erasing(*args: Any, **kwargs: Any) -> AsyncIterator[str]:
        async with real_erasing(*args, **kwargs) as key:
            if "marked" not in held:  # the command's own mark (Memory.delete_resource takes one more, inside)
                held.add("marked")
                _barrier(folder, name, "marked")
            yield key

    async def elsewhere(*args: Any, **kwargs: Any) -> Any:
        found = await real_elsewhere(*args, **kwargs)
        if "looked" not in held:
            held.add("looked")
            _barrier(folder, name, "looked")
        return found

    leasing.erasing = erasing  # type: ignore[assignment]
    leasing.erasing_elsewhere = elsewhere  # type: ignore[assignment]
    sys.argv = ["obsmem", "delete-resource", "alice", "--store", db, "--yes"]
    main()


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]), sys.argv[3])
    raise SystemExit(0)


import pytest  # noqa: E402

from obsmem import Memory, Message  # noqa: E402
from tests.crash.harness import env  # noqa: E402

pytestmark = pytest.mark.anyio


async def _alice(db: Path) -> None:
    async with Memory(f"sqlite:///{db}") as memory:
        for thread in ("t1", "t2"):
            await memory.create_thread(thread, "alice")
            await memory.save_messages(thread, [Message.user(f"Hello from {thread}"), Message.assistant("Hi.")])


async def test_two_deletes_started_at_once_one_deletes_and_alice_is_gone(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    await _alice(db)
    runs = [
        subprocess.Popen([sys.executable, __file__, str(db), str(tmp_path), name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**env(), "COLUMNS": "200"})
        for name in ("a", "b")
    ]  # fmt: skip
    done = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        done.append((run.returncode, " ".join((out + err).split())))
    assert len(list(tmp_path.glob("looked-*"))) == 2, done  # both looked while both were under way
    deleted = [said for code, said in done if code == 0]
    refused = [said for code, said in done if code != 0]
    assert len(deleted) == 1 and "deleted resource 'alice': 2 threads" in deleted[0], done
    assert len(refused) == 1 and "another delete of resource 'alice' is under way" in refused[0], done
    assert "Traceback" not in refused[0]
    async with Memory(f"sqlite:///{db}") as memory:
        assert await memory.list_threads(resource_id="alice") == []
        assert await memory.unfinished_deletes("alice") == []
