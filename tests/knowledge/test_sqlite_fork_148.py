"""The SQLite knowledge store and the SQLite vector index across ``os.fork()`` (multiprocessing's
'fork', gunicorn ``--preload``), as tests/storage/test_sqlite_fork*_138.py check the message store.

1. Workers forked from a process that had the file open each open their own store or index on
   the file (what to do after a fork), and the parent closes its own mid-way. A forked child
   holds copies of the parent's SQLite connections and with them SQLite's per-process record of
   the locks held on the file; a connection the child opened shared that record and never took
   the database's shared lock, so the parent's close checkpointed and deleted the ``-wal`` file
   under the children: half of each worker's records (or vectors) were gone, every call having
   returned normally. Every one must be in the file.
2. A store or index inherited through the fork and used in the child waited forever for the
   parent's worker thread (not copied by the fork), even to close. It must be refused at once
   with a typed error naming the fork, close without error, and leave the parent's file alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HANG_GUARD_S = 180  # a hang guard, not a measure of speed

PRELUDE = textwrap.dedent(
    """
    import asyncio, os, signal, sqlite3, sys
    from obsmem.errors import InvalidInputError
    from obsmem.knowledge import Knowledge
    from obsmem.vectors.sqlite import SQLiteVectorIndex

    path, kind = sys.argv[1], sys.argv[2]

    async def parent_open():
        if kind == "knowledge":
            k = Knowledge.sqlite(path)
            node = await k.node("Jane", "person", "org:acme")
            await k.append(node.id, "the parent, before the fork", "org:acme", reason="t")
            return k, node.id
        index = await SQLiteVectorIndex.open(path, dimensions=4)
        await index.upsert("p", [1, 0, 0, 0], "p")
        await index.search([1, 0, 0, 0])
        return index, None

    def report():
        db = sqlite3.connect(path)
        print("integrity", db.execute("PRAGMA integrity_check").fetchone()[0], flush=True)
        if kind == "knowledge":
            texts = sorted(r[0] for r in db.execute("SELECT json_extract(doc, '$.text') FROM knowledge_records"))
            for n in range(2):
                print(f"c{n}", sum(t.startswith(f"worker {n} fact") for t in texts), flush=True)
            print([t for t in texts if not t.startswith("worker")], flush=True)
        else:
            for ns, count in db.execute("SELECT namespace, count(*) FROM obsmem_vectors GROUP BY 1 ORDER BY 1"):
                print(ns, count, flush=True)
    """
)

NEW_STORES = PRELUDE + textwrap.dedent(
    """
    TURNS = 20
    loop = asyncio.new_event_loop()
    parent, node_id = loop.run_until_complete(parent_open())

    children = []
    for n in range(2):
        half_r, half_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)
            async def work():
                if kind == "knowledge":
                    async with Knowledge.sqlite(path) as k:
                        for i in range(TURNS):
                            if i == TURNS // 2:
                                os.write(half_w, b"x"); os.read(go_r, 1)
                            await k.append(node_id, f"worker {n} fact {i}", "org:acme", reason="t")
                else:
                    index = await SQLiteVectorIndex.open(path, dimensions=4)
                    for i in range(TURNS):
                        if i == TURNS // 2:
                            os.write(half_w, b"x"); os.read(go_r, 1)
                        await index.upsert(f"c{n}-{i}", [0, 1, 0, i], f"c{n}")
                    await index.close()
            asyncio.run(work())
            os._exit(0)
        children.append((pid, half_r, go_w))

    for _, half_r, _ in children:
        os.read(half_r, 1)
    loop.run_until_complete(parent.close())  # the parent closes while the workers are mid-way
    for _, _, go_w in children:
        os.write(go_w, b"x")
    for pid, _, _ in children:
        print("worker exit", os.waitpid(pid, 0)[1], flush=True)
    report()
    """
)

INHERITED = PRELUDE + textwrap.dedent(
    """
    parent, node_id = asyncio.run(parent_open())

    async def in_child(name):
        if name == "write":
            if kind == "knowledge":
                await parent.append(node_id, "from the child", "org:acme", reason="t")
            else:
                await parent.upsert("c", [0, 1, 0, 0], "c")
        elif name == "read":
            if kind == "knowledge":
                await parent.search("fork", "org:acme")
            else:
                await parent.count()
        else:
            await parent.close()

    for name in ("write", "read", "close"):
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
            sys.exit(0)
        print(f"{name} exit", os.waitpid(pid, 0)[1], flush=True)

    async def after():
        if kind == "knowledge":
            await parent.append(node_id, "after the fork", "org:acme", reason="t")
        else:
            await parent.upsert("a", [0, 0, 1, 0], "a")
        await parent.close()

    asyncio.run(after())
    report()
    """
)


def run(tmp_path: Path, script: str, kind: str) -> list[str]:
    try:
        result = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "k.db"), kind],
            capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hung; output so far: {exc.stdout!r}") from None
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("kind", "rest"),
    [
        ("knowledge", ["c0 20", "c1 20", "['the parent, before the fork']"]),
        ("vectors", ["c0 20", "c1 20", "p 1"]),
    ],
)
def test_workers_forked_after_the_parent_opened_the_file_keep_every_write(
    tmp_path: Path, kind: str, rest: list[str]
) -> None:
    assert run(tmp_path, NEW_STORES, kind) == ["worker exit 0", "worker exit 0", "integrity ok", *rest]


@pytest.mark.parametrize(
    ("kind", "rest"),
    [
        ("knowledge", ["c0 0", "c1 0", "['after the fork', 'the parent, before the fork']"]),
        ("vectors", ["a 1", "p 1"]),
    ],
)
def test_a_store_inherited_through_a_fork_is_refused_at_once(
    tmp_path: Path, kind: str, rest: list[str]
) -> None:
    assert run(tmp_path, INHERITED, kind) == [
        "write: refused True", "write exit 0",
        "read: refused True", "read exit 0",
        "close: no error", "close exit 0",
        "integrity ok", *rest,
    ]
