"""An app process SIGKILLed in the middle of an erase (``delete_thread``, ``delete_resource``,
``forget``) on the SQLite default, then restarted: the erase, called again as a user whose
request failed would call it, finishes it, and the erased text is in no table of the store.

Found by hostile review 111: ``delete_thread`` deletes the thread row (and its messages) first
and the rest after (its working memory, in resource scope its sections of the shared record and
of the other threads' markers); killed in between, the thread was gone, so calling
``delete_thread`` again returned False and did nothing, and the rest stayed for good. The same
for ``delete_resource`` killed after a thread's row went and before its working memory did.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from obsmem import Memory, Message

from .crash_child import SECRET, config
from ..lifecycle_delete.test_erased_file_bytes import in_files
from .harness import kill_at

pytestmark = pytest.mark.anyio


def tables_holding(db: Path, needle: str) -> dict[str, int]:
    """Rows of each table that hold ``needle`` in a text column (read without changing the files:
    a read-only connection, which neither checkpoints nor deletes the log when it closes)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            n = sum(any(isinstance(v, str) and needle in v for v in row) for row in conn.execute(f'SELECT * FROM "{table}"'))
            if n:
                found[table] = n
        return found
    finally:
        conn.close()


def killed(tmp_path: Path, scenario: str) -> Path:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at(scenario, db, tmp_path / "run")
    return db


@pytest.mark.parametrize("point", ["engine", "sections", "drop-data"])
@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_delete_thread_killed_midway_is_finished_by_calling_it_again(
    tmp_path: Path, point: str, scope: str
) -> None:
    db = killed(tmp_path, f"delete-thread:{point}" + ("@resource" if scope == "resource" else ""))
    assert tables_holding(db, SECRET)  # the kill left some of it: the row went, the rest not yet

    async with Memory(f"sqlite:///{db}", config=config(buffered=False, scope=scope)) as memory:
        assert await memory.delete_thread("t1")  # finished now
        assert tables_holding(db, SECRET) == {}
        assert await memory.delete_thread("t1") is False  # and done: nothing left to delete
        assert [m.id for m in await memory.list_messages("t2")][:2] == ["t2-u0", "t2-a0"]  # t2 stays
        assert await memory.get_working_memory("t2") is None  # (the resource's went with t1)


async def test_delete_resource_killed_after_a_thread_row_is_finished_by_calling_it_again(tmp_path: Path) -> None:
    db = killed(tmp_path, "delete-resource:drop-data")
    assert tables_holding(db, SECRET)

    async with Memory(f"sqlite:///{db}", config=config(buffered=False)) as memory:
        counts = await memory.delete_resource("alice")
        assert counts["threads"] == 1  # t2, still there
        assert tables_holding(db, SECRET) == {}
        assert await memory.store.get_working_memory("thread:t1") is None


def erasing_rows(db: Path) -> list[str]:
    """The notes of erases under way left in the store (none once an erase is finished)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [k for (k,) in conn.execute("SELECT key FROM working_memory WHERE key LIKE 'obsmem:erasing:%'")]
    finally:
        conn.close()


async def test_delete_thread_killed_midway_is_finished_by_deleting_its_resource(tmp_path: Path) -> None:
    """The user deletes the whole user instead of the thread again: the cut-off thread is found too."""
    db = killed(tmp_path, "delete-thread:engine@resource")
    assert erasing_rows(db)

    async with Memory(f"sqlite:///{db}", config=config(buffered=False, scope="resource")) as memory:
        await memory.delete_resource("alice")
        assert tables_holding(db, SECRET) == {}
        assert tables_holding(db, "alice") == {}
        assert erasing_rows(db) == []
        assert await memory.delete_thread("t1") is False


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_a_finished_delete_leaves_no_note(tmp_path: Path, scope: str) -> None:
    db = killed(tmp_path, "delete-thread:drop-data" + ("@resource" if scope == "resource" else ""))
    async with Memory(f"sqlite:///{db}", config=config(buffered=False, scope=scope)) as memory:
        assert await memory.delete_thread("t1")
        assert erasing_rows(db) == []
        await memory.delete_resource("alice")
        assert erasing_rows(db) == []
        assert tables_holding(db, "alice") == {}


@pytest.mark.parametrize("scenario", ["delete-thread:truncate", "forget:truncate", "delete-resource:truncate"])
async def test_an_erase_killed_before_its_files_were_cleaned_is_cleaned_when_the_store_opens(
    tmp_path: Path, scenario: str
) -> None:
    """Killed after every row was erased and before the file was rebuilt and its log truncated:
    the old pages, with the erased text, are in the ``-wal`` file. The app restarted and running
    (not calling the erase again) must not keep them there."""
    db = killed(tmp_path, scenario)
    assert tables_holding(db, SECRET) == {}
    assert in_files(db.parent, SECRET)  # the kill left the old pages in the log

    async with Memory(f"sqlite:///{db}", config=config(buffered=False), max_turn_wait=None) as memory:
        turn = await memory.begin_turn(thread_id="t3", resource_id="bob", messages=[Message.user("Hello again.")])
        await turn.end([Message.assistant("Hi.")])

        assert in_files(db.parent, SECRET) == {}


async def test_a_cut_off_delete_never_reaches_a_thread_that_took_its_id_since(tmp_path: Path) -> None:
    """After the crash another user's thread gets the deleted thread's id: the cut-off delete is
    finished first (what it left under the id, the first user's working memory, was read back as
    the new thread's: ``get_working_memory("t1")`` gave bob alice's card number), and deleting the
    first user leaves the new thread alone (it would have deleted it, by the note's id)."""
    db = killed(tmp_path, "delete-thread:drop-data")
    async with Memory(f"sqlite:///{db}", config=config(buffered=False)) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="bob", messages=[Message.user("Bob's first words.")])
        assert SECRET not in str(turn.context.messages)
        assert await memory.get_working_memory("t1") is None  # was alice's "card: CRASH-SECRET-7731"
        await turn.end([Message.assistant("Hi Bob.")])
        assert tables_holding(db, SECRET) == {}

        await memory.delete_resource("alice")

        assert [m.role for m in await memory.list_messages("t1")] == ["user", "assistant"]
        assert (await memory.get_thread("t1")).resource_id == "bob"
        assert tables_holding(db, SECRET) == {}
