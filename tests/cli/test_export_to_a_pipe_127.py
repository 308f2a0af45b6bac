"""``obsmem export -o`` naming a pipe (a FIFO a compressor reads, ``-o >(gzip > x.gz)``, or
``-o /dev/stdout`` piped on) hangs for ever (helper-127's hostile review of ec0081f).

ec0081f refuses an -o that is a SQLite database by reading its first 16 bytes
(stores._is_database). Reading a pipe the command itself is to write blocks: a FIFO's open for
reading waits for a writer, a /dev/fd pipe's read waits for data nobody will send. Before
ec0081f the export opened the path for writing and finished.

The subprocess's timeout is only a guard for the hang, not a measure of speed: the export of
two messages takes well under a second.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from obsmem import Memory, Message


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread("t-alice", "alice")
            await memory.save_messages("t-alice", [Message.user("hello from alice")])

    asyncio.run(run())


@pytest.mark.skipif(not hasattr(os, "pipe") or sys.platform == "win32", reason="POSIX pipes")
def test_export_into_a_pipe_finishes(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    read_end, write_end = os.pipe()
    received: list[bytes] = []

    def drain() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            received.append(pipe.read())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    process = subprocess.Popen(
        [sys.executable, "-m", "obsmem", "export", "-r", "alice", "--store", str(db), "-o", f"/dev/fd/{write_end}"],
        pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    os.close(write_end)
    try:
        process.wait(timeout=60)  # a hang guard: the export itself is immediate
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail("obsmem export -o /dev/fd/N (a pipe) never finished")
    finally:
        reader.join(timeout=30)
    assert process.returncode == 0
    assert b"hello from alice" in b"".join(received)
