"""Erased text is gone from the SQLite database file even where SQLite itself left a copy: in the
unused space of a live page.

``secure_delete`` zeroes the space a delete or an update frees, but when a row grows (a message
saved again under its id with more parts) and its page overflows, SQLite's b-tree balancing
moves cells to a sibling page and rebuilds the page without zeroing the space they held: a
stale copy of a live message stays in the gap of another ``messages`` leaf page. Erasing the
message zeroed its live cell and left that copy in ``m.db`` (one to three copies in these
scenarios, before every erase ended by rebuilding the file with ``VACUUM``:
:mod:`obsmem.storage.sqlite.wal`).

The scenarios are deterministic (the same sizes give the same page layout); each checks first
that the history it wrote did leave a stale copy in the file, so it cannot pass vacuously.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.storage.sqlite.wal import LogTruncation

from .test_erased_file_bytes import in_files

pytestmark = pytest.mark.anyio

SECRET = "CARD-4111-9999-ERASEME"


async def edited_history(memory: Memory, seed: int, *, every: int, n: int = 200) -> None:
    """``n`` messages of varied length, every ``every``-th in alice's thread t1 (holding the
    secret), the others in bob's thread t2; then ``n`` edits, each saving a random message again
    under its id with one more part (the rows grow: SQLite rebalances its pages)."""
    rnd = random.Random(seed)
    await memory.create_thread("t1", resource_id="alice")
    await memory.create_thread("t2", resource_id="bob")
    saved: list[Message] = []
    for i in range(n):
        thread = "t1" if i % every == 0 else "t2"
        text = "word " * rnd.randint(2, 120) + (SECRET if thread == "t1" else "kept")
        saved += await memory.save_messages(thread, [Message.user(text)])
    for _ in range(n):
        i = rnd.randrange(n)
        more = Message.user(" edited" * rnd.randint(1, 80)).parts
        [saved[i]] = await memory.save_messages(
            saved[i].thread_id or "", [saved[i].model_copy(update={"parts": (*saved[i].parts, *more)})]
        )


def stale_copies(db: Path) -> int:
    """Copies of the secret in the database file beyond those in live rows (the log moved into
    the file first, by a connection of our own)."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        live = sum(str(parts).count(SECRET) for (parts,) in conn.execute("SELECT parts FROM messages"))
    conn.close()
    return db.read_bytes().count(SECRET.encode()) - live


async def erase_after_edits(
    tmp_path: Path, erase: str, seeds: range, every: int
) -> tuple[int, dict[str, int]]:
    """For each seed, a fresh store with the edited history, then ``erase``; the stale copies
    found before the erases, and what every file holds after them."""
    planted = 0
    left: dict[str, int] = {}
    for seed in seeds:
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        memory = Memory(f"sqlite:///{folder}/m.db", max_turn_wait=None)
        await edited_history(memory, seed, every=every)
        planted += stale_copies(folder / "m.db")
        if erase == "forget":
            counts = await memory.forget(SECRET, resource_id="alice")
            assert counts["messages"] > 0
        elif erase == "delete_thread":
            assert await memory.delete_thread("t1")
        else:
            await memory.delete_resource("alice")
        for name, count in in_files(folder, SECRET).items():
            left[f"seed{seed}/{name}"] = count
        assert len(await memory.list_messages("t2")) == 200 - len(range(0, 200, every))  # bob's stay
        await memory.aclose()
    return planted, left


async def test_forget_leaves_no_copy_in_the_unused_space_of_pages(tmp_path: Path) -> None:
    planted, left = await erase_after_edits(tmp_path, "forget", range(3), every=2)
    assert planted >= 1, "the edits left no stale copy in the file: the scenario no longer reproduces"
    assert left == {}  # before the fix: {'seed0/m.db': 1, 'seed1/m.db': 1, 'seed2/m.db': 1}


async def test_delete_thread_leaves_no_copy_in_the_unused_space_of_pages(tmp_path: Path) -> None:
    planted, left = await erase_after_edits(tmp_path, "delete_thread", range(3), every=3)
    assert planted >= 1, "the edits left no stale copy in the file: the scenario no longer reproduces"
    assert left == {}  # before the fix: {'seed2/m.db': 1}


async def test_delete_resource_leaves_no_copy_in_the_unused_space_of_pages(tmp_path: Path) -> None:
    planted, left = await erase_after_edits(tmp_path, "delete_resource", range(3), every=3)
    assert planted >= 1, "the edits left no stale copy in the file: the scenario no longer reproduces"
    assert left == {}  # before the fix: {'seed2/m.db': 1}


async def test_an_open_reader_delays_the_clean_up_but_not_the_call(tmp_path: Path) -> None:
    """A reader's snapshot keeps the log (the rebuilt pages stay in it, the old ones in the
    file): the forget still returns, every read is clean, and once the reader is done the
    store's next write finishes the clean-up."""
    memory = Memory(f"sqlite:///{tmp_path}/m.db", max_turn_wait=None)
    await edited_history(memory, 0, every=2)
    assert stale_copies(tmp_path / "m.db") >= 1
    reader = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()

    await memory.forget(SECRET, resource_id="alice")

    assert SECRET not in str(await memory.list_messages("t1"))
    assert "m.db" in in_files(tmp_path, SECRET)  # kept for the reader, for now
    reader.execute("COMMIT")
    reader.close()
    await memory.save_messages("t2", [Message.user("one more")])
    assert in_files(tmp_path, SECRET) == {}
    await memory.aclose()


def test_a_rebuild_another_writer_holds_off_is_done_after_a_later_write(tmp_path: Path) -> None:
    """Another connection holding the write lock keeps ``VACUUM`` from running: the clean-up
    reports it (False, pending) within its bound, and the next write of the store does it."""
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA secure_delete = OFF")  # (many builds have it on by default)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO t (body) VALUES (?)", (SECRET,))
    conn.execute("DELETE FROM t")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert in_files(tmp_path, SECRET) == {"x.db": 1}  # the freed cell keeps the text
    log = LogTruncation(busy_timeout_s=5)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")

    assert not log.now(conn)
    assert log.rebuild_pending

    other.execute("COMMIT")
    other.close()
    conn.execute("INSERT INTO t (body) VALUES ('later')")
    log.after_write(conn)
    assert not log.rebuild_pending and not log.pending
    assert in_files(tmp_path, SECRET) == {}
    assert (tmp_path / "x.db-wal").stat().st_size == 0
    conn.close()
