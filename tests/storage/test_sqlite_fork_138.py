"""An async ``Memory`` on the SQLite default inherited through ``os.fork()`` (multiprocessing's
'fork' start method, gunicorn ``--preload`` with a module-level ``Memory``).

The child has none of the parent's threads: the store's worker thread (which owns the SQLite
connection and runs every write) is not there. A call from the child used to wait forever for
that thread (``list_messages``, ``begin_turn``: the child hung until killed), and the few reads
done where they are called (``get_context``) went through the parent's SQLite connection, which
SQLite forbids using in a forked child. The child must be refused at once with a typed error
naming the fork, close and exit normally, and leave the parent's memory and file alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# Runs in a fresh interpreter so a hang (the bug) fails the test instead of the run; the
# timeout is a hang guard, not a measure of speed.
HANG_GUARD_S = 120

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sqlite3, sys
    from obsmem import Memory, Message
    from obsmem.errors import InvalidInputError

    path = sys.argv[1]
    memory = Memory(f"sqlite:///{path}")

    async def turn(text):
        t = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(text)])
        await t.end([Message.assistant("noted")])

    asyncio.run(turn("before the fork"))

    async def in_child(name):
        if name == "list":
            await memory.list_messages("t")
        elif name == "context":
            await memory.get_context("t")
        elif name == "turn":
            await turn("from the child")
        else:
            await memory.aclose()

    for name in ("list", "context", "turn", "close"):
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a hang (the bug) ends the child, not the test
            try:
                asyncio.run(in_child(name))
                print(f"{name}: no error", flush=True)
            except InvalidInputError as exc:
                print(f"{name}: refused", "fork" in str(exc), flush=True)
            except BaseException as exc:
                print(f"{name}: {type(exc).__name__}", flush=True)
            sys.exit(0)  # a normal exit: atexit finalizers run
        _, status = os.waitpid(pid, 0)
        print(f"{name} exit", status, flush=True)

    asyncio.run(turn("after the fork"))

    async def finish():
        texts = [m.text for m in await memory.list_messages("t")]
        await memory.aclose()
        return texts

    print("parent", asyncio.run(finish()), flush=True)
    print("integrity", sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0], flush=True)
    """
)


def test_a_forked_child_of_an_async_memory_is_refused_at_once_and_exits(tmp_path: Path) -> None:
    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "m.db")],
            capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hung; output so far: {exc.stdout!r}") from None
    assert result.stdout.splitlines() == [
        "list: refused True",
        "list exit 0",
        "context: refused True",
        "context exit 0",
        "turn: refused True",
        "turn exit 0",
        "close: no error",
        "close exit 0",
        "parent ['before the fork', 'noted', 'after the fork', 'noted']",
        "integrity ok",
    ], result.stdout + result.stderr[-3000:]
