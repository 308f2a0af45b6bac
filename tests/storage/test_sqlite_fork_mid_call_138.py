"""A worker forked while its parent's store was in the middle of a write (a busy app forking a
worker, multiprocessing 'fork' while a turn of another thread commits), opening its own
``Memory`` on the file as the README says to do after a fork.

The child's copy of the parent's connection was mid-transaction at the fork, and SQLite's record
of the locks held on the file, copied with it, says this process holds the write lock. A new
connection the child opens on the file shares that record and can never take the lock: the
child's first turn waited the whole retry budget (about 51 s) and failed with "database is
locked" though the parent had committed at once, and so would every later write of the child.
Such a child must be told at once, with a typed error naming the fork, and the parent's file
must be left as it was.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HANG_GUARD_S = 150  # a hang guard, not a measure of speed

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sqlite3, sys, threading
    from obsmem import Memory, Message
    from obsmem.errors import StorageError

    path = sys.argv[1]
    url = f"sqlite:///{path}"
    memory = Memory(url)

    async def turn(m, thread, text):
        t = await m.begin_turn(thread_id=thread, resource_id="u", messages=[Message.user(text)])
        await t.end([Message.assistant("noted")])

    async def child():
        async with Memory(url) as mine:
            await turn(mine, "c", "the worker's turn")

    async def main():
        await turn(memory, "p", "before the fork")
        began, forked = threading.Event(), threading.Event()

        def write(conn):  # a write of the parent, under way on the store's thread at the fork
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO working_memory (key, text, updated_at) VALUES ('k', 'v', 'now')")
            began.set()
            forked.wait(60)
            conn.execute("COMMIT")

        job = asyncio.ensure_future(memory.store._call(write))
        await asyncio.to_thread(began.wait, 60)
        pid = os.fork()
        if pid == 0:
            signal.alarm(120)
            try:
                asyncio.run(child())
                print("worker: no error", flush=True)
            except StorageError as exc:
                told, locked = "was forked while" in str(exc), "failed: database is locked" in str(exc)
                print("worker: refused", told, locked, flush=True)
            os._exit(0)
        forked.set()
        await job
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        print("worker exit", status, flush=True)
        await turn(memory, "p", "after the fork")
        print("parent", len(await memory.list_messages("p")), flush=True)
        await memory.aclose()

    asyncio.run(main())
    print("integrity", sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0], flush=True)
    """
)


def test_a_worker_forked_mid_write_is_refused_at_once(tmp_path: Path) -> None:
    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "m.db")],
            capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hung; output so far: {exc.stdout!r}") from None
    assert result.stdout.splitlines() == [
        "worker: refused True False",
        "worker exit 0",
        "parent 4",
        "integrity ok",
    ], result.stdout + result.stderr[-3000:]
