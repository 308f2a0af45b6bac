"""A process that opened the SQLite file forks workers, each of which opens its own ``Memory``
on the file (what the README says to do after a fork: gunicorn ``--preload``, multiprocessing's
'fork'), and later the parent closes its ``Memory``.

A forked child holds a copy of the parent's SQLite connections, and with them SQLite's
in-process record of the locks that process holds on the file. A new connection the child opens
on the same file used to share that copied record: it believed the database's shared lock
already held and never took it from the system, so the parent, closing its last connection,
found nobody holding the file, checkpointed and deleted the ``-wal`` file under the children.
What the children committed afterwards went into a deleted file: their turns returned, and the
messages were gone. The inherited connections must be let go in the child, so its own
connections take real locks: every message every worker saved must be in the file.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HANG_GUARD_S = 180  # a hang guard, not a measure of speed

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sqlite3, sys
    from obsmem import Memory, Message, SyncMemory

    path, kind = sys.argv[1], sys.argv[2]
    url = f"sqlite:///{path}"
    TURNS = 20

    async def turn(memory, thread, text):
        t = await memory.begin_turn(thread_id=thread, resource_id="u", messages=[Message.user(text)])
        await t.end([Message.assistant("noted " + text)])

    def sync_turn(memory, thread, text):
        memory.begin_turn(thread_id=thread, resource_id="u", messages=[Message.user(text)]).end(
            [Message.assistant("noted " + text)])

    if kind == "async":
        parent = Memory(url)
        asyncio.run(turn(parent, "p", "the parent, before the fork"))
    else:
        parent = SyncMemory(url)
        sync_turn(parent, "p", "the parent, before the fork")

    children = []
    for n in range(2):
        half_done_r, half_done_w = os.pipe()
        go_on_r, go_on_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)
            if kind == "async":
                async def work():
                    async with Memory(url) as memory:
                        for i in range(TURNS):
                            if i == TURNS // 2:
                                os.write(half_done_w, b"x")
                                os.read(go_on_r, 1)
                            await turn(memory, f"c{n}", f"worker {n} turn {i}")
                asyncio.run(work())
            else:
                with SyncMemory(url) as memory:
                    for i in range(TURNS):
                        if i == TURNS // 2:
                            os.write(half_done_w, b"x")
                            os.read(go_on_r, 1)
                        sync_turn(memory, f"c{n}", f"worker {n} turn {i}")
            os._exit(0)
        children.append((pid, half_done_r, go_on_w))

    for _, half_done_r, _ in children:
        os.read(half_done_r, 1)
    if kind == "async":  # the parent closes its memory while the workers are mid-way
        asyncio.run(parent.aclose())
    else:
        parent.close()
    for _, _, go_on_w in children:
        os.write(go_on_w, b"x")
    for pid, _, _ in children:
        print("worker exit", os.waitpid(pid, 0)[1], flush=True)

    db = sqlite3.connect(path)
    print("integrity", db.execute("PRAGMA integrity_check").fetchone()[0], flush=True)
    for thread, count in db.execute("SELECT thread_id, count(*) FROM messages GROUP BY thread_id ORDER BY 1"):
        print(thread, count, flush=True)
    """
)


def run(tmp_path: Path, kind: str) -> list[str]:
    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "m.db"), kind],
            capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hung; output so far: {exc.stdout!r}") from None
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result.stdout.splitlines()


EXPECTED = ["worker exit 0", "worker exit 0", "integrity ok", "c0 40", "c1 40", "p 2"]


def test_workers_forked_from_an_async_memory_keep_every_message(tmp_path: Path) -> None:
    assert run(tmp_path, "async") == EXPECTED


def test_workers_forked_from_a_sync_memory_keep_every_message(tmp_path: Path) -> None:
    assert run(tmp_path, "sync") == EXPECTED
