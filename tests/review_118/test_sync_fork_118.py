"""A SyncMemory inherited through os.fork() (gunicorn --preload, multiprocessing 'fork').

The child has none of the parent's threads, so the facade's event loop is not running there: a
call from the child used to wait forever, and so did the child's exit (the garbage-collection
finalizer closes the memory at interpreter exit). The child must be refused clearly, exit
normally, and leave the parent's memory and its SQLite file alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Runs in a fresh interpreter so a hang (the bug) fails the test instead of the run; the
# timeout is a hang guard, not a measure of speed.
HANG_GUARD_S = 120

SCRIPT = textwrap.dedent(
    """
    import os, sqlite3, sys
    from obsmem import Message, SyncMemory
    from obsmem.errors import InvalidInputError

    path = sys.argv[1]
    memory = SyncMemory(f"sqlite:///{path}")
    memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("before the fork")]).end(
        [Message.assistant("noted")])

    pid = os.fork()
    if pid == 0:  # a worker that uses the inherited memory
        try:
            memory.list_messages("t")
            print("child-used: no error", flush=True)
        except InvalidInputError as exc:
            print("child-used: refused", "fork" in str(exc), flush=True)
        sys.exit(0)  # a normal exit: atexit finalizers run
    print("child-used exit", os.waitpid(pid, 0)[1], flush=True)

    pid = os.fork()
    if pid == 0:  # a worker that never touches it, then exits normally
        sys.exit(0)
    print("child-idle exit", os.waitpid(pid, 0)[1], flush=True)

    memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("after the fork")]).end()
    print("parent messages", len(memory.list_messages("t")), flush=True)
    memory.close()
    print("integrity", sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0], flush=True)
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_is_refused_clearly_and_exits(tmp_path: Path) -> None:
    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "m.db")],
            capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung; output so far: {exc.stdout!r}")
    lines = result.stdout.splitlines()
    assert lines == [
        "child-used: refused True",
        "child-used exit 0",
        "child-idle exit 0",
        "parent messages 3",
        "integrity ok",
    ], result.stderr[-2000:]


MID_CALL_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading
    from obsmem import SyncMemory
    from obsmem.errors import InvalidInputError

    memory = SyncMemory("memory://")
    memory.create_thread("t", "u")
    # Another thread is in the middle of handing a call over to the memory's loop when the
    # process forks (a threaded app forking a worker): the child inherits the facade's lock held.
    holding, release = threading.Event(), threading.Event()
    def mid_call():
        with memory._portal._lock:
            holding.set()
            release.wait()
    threading.Thread(target=mid_call, daemon=True).start()
    holding.wait()
    pid = os.fork()
    if pid == 0:
        try:
            memory.list_messages("t")
            print("child: no error", flush=True)
        except InvalidInputError:
            print("child: refused", flush=True)
        sys.exit(0)
    release.set()
    print("child exit", os.waitpid(pid, 0)[1], flush=True)
    print("parent", len(memory.list_messages("t")), flush=True)
    memory.close()
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_was_mid_call_is_refused_too() -> None:
    try:
        result = subprocess.run(
            [sys.executable, "-c", MID_CALL_SCRIPT], capture_output=True, text=True, timeout=HANG_GUARD_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung; output so far: {exc.stdout!r}")
    assert result.stdout.splitlines() == ["child: refused", "child exit 0", "parent 0"], result.stderr[-2000:]
