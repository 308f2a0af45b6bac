"""Erased text is gone from the SQLite files themselves, not only from the tables, as soon as the
call returns and while the stores stay open: the database file, its ``-wal`` log and ``-shm``
index, for the message store and the knowledge store.

A read API (and a table scan) sees the newest version of every page; the ``-wal`` file still
holds the older versions the erase replaced, and a page freed without ``secure_delete`` keeps
its old bytes in the database file. Both are readable by anyone who copies the files.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import SQLiteStore

from ..knowledge.test_lifecycle import plant as plant_knowledge
from .test_forget import config, plant

pytestmark = pytest.mark.anyio

SECRET = "CARD-4111-9999-ERASEME"


def in_files(folder: Path, needle: str) -> dict[str, int]:
    """How often ``needle`` occurs in the bytes of each file in ``folder`` (db, -wal, -shm)."""
    counts = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and (n := path.read_bytes().count(needle.encode())):
            counts[path.name] = n
    return counts


async def planted(
    tmp_path: Path, resource_id: str = "alice", *, thread_only: bool = False
) -> tuple[Memory, Knowledge]:
    """The secret in both stores; ``thread_only``: in knowledge only at thread t1's scope (what
    deleting t1 purges; the resource's records are shared with its other threads)."""
    knowledge = Knowledge(SQLiteKnowledgeStore(tmp_path / "k.db"), actor="tester")
    memory = Memory(f"sqlite:///{tmp_path}/m.db", config=config(), max_turn_wait=None, knowledge=knowledge)
    await plant(memory, "t1", resource_id, SECRET)
    await plant(memory, "t2", resource_id, "another note", turns=2)
    resource_scope = f"org:default/resource:{resource_id}"
    if thread_only:
        jane = await knowledge.node("Jane", "person", resource_scope)
        for i in range(3):
            await knowledge.append(
                jane.id, f"Jane's card {i} is {SECRET}", f"{resource_scope}/thread:t1", reason="t1"
            )
        await knowledge.drain()
    else:
        await plant_knowledge(knowledge, SECRET, res=resource_scope)
    await memory.settled()
    found = in_files(tmp_path, SECRET)
    assert {"m.db-wal", "k.db-wal"} <= set(found), found  # planted, and still in the logs
    return memory, knowledge


async def test_forget_leaves_no_bytes_in_the_files(tmp_path: Path) -> None:
    memory, knowledge = await planted(tmp_path)

    await memory.forget(SECRET, resource_id="alice")

    assert in_files(tmp_path, SECRET) == {}
    assert (tmp_path / "m.db-wal").exists()  # the stores are still open
    await memory.aclose()
    await knowledge.close()


async def test_delete_thread_leaves_no_bytes_in_the_files(tmp_path: Path) -> None:
    memory, knowledge = await planted(tmp_path, thread_only=True)
    await memory.store.set_working_memory("resource:alice", "team: core")  # no secret outside t1

    assert await memory.delete_thread("t1")

    assert in_files(tmp_path, SECRET) == {}
    assert await memory.list_messages("t2")  # the other thread stays
    await memory.aclose()
    await knowledge.close()


async def test_delete_resource_leaves_no_bytes_in_the_files(tmp_path: Path) -> None:
    memory, knowledge = await planted(tmp_path, resource_id="RES-" + SECRET)

    await memory.delete_resource("RES-" + SECRET)

    assert in_files(tmp_path, SECRET) == {}
    await memory.aclose()
    await knowledge.close()


async def test_an_open_reader_delays_the_log_truncation_but_not_the_call(tmp_path: Path) -> None:
    """Another connection in a read transaction keeps the log: the forget still returns within
    its bound (under a second of waiting, not the store's 10 s busy timeout) and every read is
    clean; once the reader is done, the store's next write truncates the log."""
    memory, knowledge = await planted(tmp_path)
    reader = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()

    started = time.monotonic()
    await memory.forget(SECRET, resource_id="alice")
    assert time.monotonic() - started < 4

    assert SECRET not in str(await memory.list_messages("t1")) + await memory.get_observations("t1")
    assert "m.db-wal" in in_files(tmp_path, SECRET)  # kept for the reader, for now
    reader.execute("COMMIT")
    reader.close()
    turn = await memory.begin_turn(thread_id="t2", messages=[Message.user("What is next?")])
    await turn.end([Message.assistant("Step 3.")])
    assert in_files(tmp_path, SECRET) == {}
    await memory.aclose()
    await knowledge.close()


async def test_both_stores_zero_what_they_free(tmp_path: Path) -> None:
    """``secure_delete`` on every store connection. Many SQLite builds (Debian's, this test
    machine's) compile it in as the default, so the byte scans above pass there without the
    pragma; builds without it (python.org's, macOS's) leave deleted cells in the file's pages."""
    memory, knowledge = await planted(tmp_path)
    store, kstore = memory.store, knowledge.store
    assert isinstance(store, SQLiteStore) and isinstance(kstore, SQLiteKnowledgeStore)
    pragma = "PRAGMA secure_delete"
    assert await store._call(lambda conn: conn.execute(pragma).fetchone()[0]) == 1
    assert await kstore._on_thread(lambda: kstore._connection().execute(pragma).fetchone()[0]) == 1
    await memory.aclose()
    await knowledge.close()
