"""SQLite specifics: WAL, default location, migrations, busy handling, and processes sharing a file.

Behaviour shared with other adapters is tested in ``tests/conformance``; this file covers what
only the SQLite adapter has.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import platformdirs
import pytest

from obsmem.errors import MigrationError, StorageError
from obsmem.storage import (
    ObservationRecord,
    SQLiteStore,
    default_store_path,
    lineage_key,
    migrations,
    open_store,
)
from obsmem.storage.migrations import MIGRATIONS_TABLE, SQLITE, SQLITE_MIGRATIONS, MigrationSet
from obsmem.storage.sqlite import store as sqlite_store
from obsmem.types import Message, Thread

LINEAGE = "thread:t1"


def head_record() -> ObservationRecord:
    return ObservationRecord(
        id="om-1", lineage=lineage_key("thread", "t1", "r1"), scope="thread", thread_id="t1", resource_id="r1"
    )


async def seeded(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        assert (await store.create_record(head_record())).applied


def blank_connection(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


# -- file, pragmas, location ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_wal_mode_and_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "deeper" / "om.db"
    async with SQLiteStore(path) as store:
        assert store.url == f"sqlite:///{path}"
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        pragmas = await store._call(
            lambda conn: (
                conn.execute("PRAGMA journal_mode").fetchone()[0],
                conn.execute("PRAGMA foreign_keys").fetchone()[0],
                conn.execute("PRAGMA busy_timeout").fetchone()[0],
            )
        )
    assert pragmas == ("wal", 1, 10_000)
    with blank_connection(path) as conn:  # WAL is a property of the file, seen by any connection
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.anyio
async def test_default_path_is_under_obsmem_home(_isolated_home: Path) -> None:
    assert default_store_path() == _isolated_home / "obsmem.db"
    assert not _isolated_home.exists()
    store = open_store()
    assert isinstance(store, SQLiteStore) and store.path == _isolated_home / "obsmem.db"
    async with store:
        await store.set_working_memory("k", "v")
    assert (_isolated_home / "obsmem.db").is_file()


def test_default_path_without_obsmem_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OBSMEM_HOME")
    assert default_store_path() == Path(platformdirs.user_data_dir("obsmem")) / "obsmem.db"


def test_constructing_does_no_io(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "a" / "b.db")
    assert not (tmp_path / "a").exists()


@pytest.mark.anyio
async def test_sqlite_errors_become_storage_errors(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    async with SQLiteStore(tmp_path / "dir.db") as store:
        with pytest.raises(StorageError) as info:
            await store.get_thread("t1")
    assert isinstance(info.value.__cause__, sqlite3.Error)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    async with SQLiteStore(blocker / "om.db") as store:
        with pytest.raises(StorageError):
            await store.get_thread("t1")


@pytest.mark.anyio
async def test_operations_run_on_one_worker_thread(tmp_path: Path) -> None:
    import threading

    async with SQLiteStore(tmp_path / "om.db") as store:
        names = {await store._call(lambda conn: threading.current_thread().name) for _ in range(5)}
        assert len(names) == 1 and names.pop().startswith("obsmem-sqlite")
        assert threading.current_thread() is threading.main_thread()


# -- migrations -----------------------------------------------------------------------------------

EXPECTED_SCHEMA = {
    "_obsmem_migrations": {"name": "TEXT", "applied_at": "TEXT"},
    "threads": {
        "pk": "INTEGER",
        "id": "TEXT",
        "resource_id": "TEXT",
        "org_id": "TEXT",
        "title": "TEXT",
        "title_pinned": "INTEGER",
        "metadata": "TEXT",
        "created_at": "TEXT",
        "created_us": "INTEGER",
        "updated_at": "TEXT",
        "version": "INTEGER",
        "message_rev": "INTEGER",  # m006
        "activity": "INTEGER",  # m008
    },
    "messages": {
        "seq": "INTEGER",
        "id": "TEXT",
        "thread_id": "TEXT",
        "role": "TEXT",
        "parts": "TEXT",
        "created_at": "TEXT",
        "metadata": "TEXT",
    },
    "observation_records": {
        "pk": "INTEGER",
        "id": "TEXT",
        "lineage": "TEXT",
        "scope": "TEXT",
        "thread_id": "TEXT",
        "resource_id": "TEXT",
        "generation": "INTEGER",
        "origin": "TEXT",
        "version": "INTEGER",
        "superseded_by": "TEXT",
        "created_at": "TEXT",
        "updated_at": "TEXT",
        "active_observations": "TEXT",
        "observation_tokens": "INTEGER",
        "total_tokens_observed": "INTEGER",
        "pending_message_tokens": "INTEGER",
        "threads": "TEXT",
        "buffered_chunks": "TEXT",
        "buffered_reflection": "TEXT",
        "reflection_suppressed_at": "INTEGER",
        "config": "TEXT",
        "metadata": "TEXT",
        "buffer_boundary_tokens": "INTEGER",  # m002
        "reflection_boundary_tokens": "INTEGER",  # m002
    },
    "working_memory": {"key": "TEXT", "text": "TEXT", "updated_at": "TEXT"},
    "leases": {  # m002
        "key": "TEXT",
        "owner": "TEXT",
        "token": "INTEGER",
        "acquired_at": "TEXT",
        "expires_at": "TEXT",
    },
    "lease_tokens": {"id": "INTEGER", "last_token": "INTEGER"},  # m002
    "work_items": {  # m003
        "id": "INTEGER",
        "kind": "TEXT",
        "target": "TEXT",
        "payload": "TEXT",
        "enqueued_at": "TEXT",
        "available_at": "TEXT",
        "available_us": "INTEGER",
        "attempts": "INTEGER",
        "claimed_by": "TEXT",
        "claim_token": "INTEGER",
        "claim_expires_at": "TEXT",
        "claim_expires_us": "INTEGER",
        "last_error": "TEXT",
    },
    "dead_work": {  # m004
        "id": "INTEGER",
        "kind": "TEXT",
        "target": "TEXT",
        "payload": "TEXT",
        "enqueued_at": "TEXT",
        "attempts": "INTEGER",
        "last_error": "TEXT",
        "failed_at": "TEXT",
    },
    "model_calls": {  # m005
        "id": "INTEGER",
        "started_at": "TEXT",
        "started_us": "INTEGER",
        "day": "TEXT",
        "role": "TEXT",
        "model": "TEXT",
        "kind": "TEXT",
        "operation": "TEXT",
        "thread_id": "TEXT",
        "resource_id": "TEXT",
        "input_tokens": "INTEGER",
        "cached_input_tokens": "INTEGER",
        "cache_write_tokens": "INTEGER",
        "output_tokens": "INTEGER",
        "latency_s": "REAL",
        "outcome": "TEXT",
        "error_type": "TEXT",
        "finish_reason": "TEXT",
    },
    "thread_activity": {"id": "INTEGER", "last": "INTEGER"},  # m008
    "forgotten_ids": {"thread_id": "TEXT", "message_id": "TEXT"},  # m009
}
ALL_MIGRATIONS = [
    "m001_initial", "m002_leases_and_boundaries", "m003_work_queue", "m004_dead_work", "m005_model_calls",
    "m006_message_rev", "m007_threads_by_creation", "m008_thread_activity", "m009_forgotten_ids",
]
EXPECTED_INDEXES = {
    "threads_by_resource": "threads",
    "threads_by_creation": "threads",  # m007
    "threads_by_activity": "threads",  # m008
    "messages_by_thread": "messages",
    "observation_records_one_head": "observation_records",
    "observation_records_by_lineage": "observation_records",
    "work_items_one_waiting": "work_items",
    "dead_work_by_target": "dead_work",
    "model_calls_by_resource": "model_calls",
    "model_calls_by_thread": "model_calls",
    "model_calls_by_time": "model_calls",
}


def test_blank_database_gets_exact_schema(tmp_path: Path) -> None:
    with blank_connection(tmp_path / "blank.db") as conn:
        assert migrations.pending(conn) == ALL_MIGRATIONS
        assert (
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        )  # pending() wrote nothing
        assert migrations.migrate(conn) == ALL_MIGRATIONS
        tables = {
            name: {col[1]: col[2] for col in conn.execute(f"PRAGMA table_info({name})")}
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        indexes = dict(
            conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        )
        assert migrations.pending(conn) == []
        assert migrations.migrate(conn) == []
        assert conn.execute("SELECT id, last_token FROM lease_tokens").fetchall() == [(1, 0)]
    assert tables == EXPECTED_SCHEMA
    assert indexes == EXPECTED_INDEXES


@pytest.mark.anyio
async def test_store_migrate_lists_then_applies_the_steps_of_a_blank_file(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    async with SQLiteStore(path) as store:
        assert await store.migrate(dry_run=True) == ALL_MIGRATIONS
        with blank_connection(path) as conn:
            assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0  # only read
        assert await store.migrate() == ALL_MIGRATIONS
        assert await store.migrate() == [] and await store.migrate(dry_run=True) == []


def _folder_state(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``folder``: size, modification time and content, to show nothing changed."""
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.anyio
async def test_dry_run_creates_neither_the_folder_nor_the_file(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "om.db"
    async with SQLiteStore(path) as store:
        assert await store.migrate(dry_run=True) == ALL_MIGRATIONS
    assert not (tmp_path / "not").exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
async def test_dry_run_on_an_existing_file_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "data" / "om.db"
    await seeded(path)
    # An older database: its newest step not applied yet.
    conn = blank_connection(path)
    try:
        conn.execute(f"DELETE FROM {MIGRATIONS_TABLE} WHERE name = ?", (ALL_MIGRATIONS[-1],))
    finally:
        conn.close()
    before = _folder_state(tmp_path)
    assert list(before) == ["data/om.db"]  # closed cleanly: no -wal / -shm beside it

    async with SQLiteStore(path) as store:
        assert await store.migrate(dry_run=True) == [ALL_MIGRATIONS[-1]]
    assert _folder_state(tmp_path) == before

    # While another connection has the file open (its WAL files present), a dry run still reads.
    holder = blank_connection(path)
    try:
        assert holder.execute("SELECT COUNT(*) FROM threads").fetchone() == (1,)
        during = set(_folder_state(tmp_path))
        assert during == {"data/om.db", "data/om.db-wal", "data/om.db-shm"}
        async with SQLiteStore(path) as store:
            assert await store.migrate(dry_run=True) == [ALL_MIGRATIONS[-1]]
        assert set(_folder_state(tmp_path)) == during
    finally:
        holder.close()


@pytest.mark.anyio
async def test_migration_table_records_what_ran(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "om.db") as store:
        await store.get_thread("t1")
    with blank_connection(tmp_path / "om.db") as conn:
        rows = conn.execute(f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}").fetchall()
    assert [name for name, _ in rows] == SQLITE_MIGRATIONS.names() == ALL_MIGRATIONS
    assert all(datetime.fromisoformat(at).tzinfo is not None for _, at in rows)


def test_migration_numbers_and_names_are_unique() -> None:
    registered = SQLITE_MIGRATIONS.all()
    assert len({m.number for m in registered}) == len(registered)
    assert len({m.name for m in registered}) == len(registered)
    assert all(re.fullmatch(rf"m{m.number:03d}_[a-z0-9_]+", m.name) for m in registered)
    assert [m.number for m in registered] == sorted(m.number for m in registered)


def test_registration_rejects_duplicates_and_bad_names() -> None:
    fresh = MigrationSet(SQLITE)

    def m001_first(conn: sqlite3.Connection) -> None: ...

    def m001_again(conn: sqlite3.Connection) -> None: ...

    def add_stuff(conn: sqlite3.Connection) -> None: ...

    fresh.register(m001_first)
    with pytest.raises(MigrationError, match="used twice"):
        fresh.register(m001_again)
    with pytest.raises(MigrationError):
        fresh.register(m001_first)
    with pytest.raises(MigrationError, match="m<NNN>_"):
        fresh.register(add_stuff)
    assert fresh.names() == ["m001_first"]


def test_failing_migration_rolls_back_with_its_record(tmp_path: Path) -> None:
    fresh = MigrationSet(SQLITE)

    @fresh.register
    def m001_good(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE good (x)")

    @fresh.register
    def m002_broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (x)")
        raise RuntimeError("boom")

    with blank_connection(tmp_path / "m.db") as conn:
        with pytest.raises(RuntimeError):
            fresh.migrate(conn)
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "good" in names and "half" not in names
        assert [m.name for m in fresh.pending(conn)] == ["m002_broken"]


def test_a_step_that_waits_is_rolled_back_and_stays_pending(tmp_path: Path) -> None:
    fresh = MigrationSet(SQLITE)
    ready = [False]

    @fresh.register
    def m001_needs_an_extension(conn: sqlite3.Connection) -> bool:
        conn.execute("CREATE TABLE early (x)")
        return ready[0]

    @fresh.register
    def m002_independent(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE later (x)")

    def tables(conn: sqlite3.Connection) -> set[str]:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    with blank_connection(tmp_path / "m.db") as conn:
        assert fresh.migrate(conn) == ["m002_independent"]  # later steps still run
        assert "early" not in tables(conn) and "later" in tables(conn)
        assert [m.name for m in fresh.pending(conn)] == ["m001_needs_an_extension"]
        ready[0] = True
        assert fresh.migrate(conn) == ["m001_needs_an_extension"]
        assert "early" in tables(conn) and fresh.pending(conn) == []


@pytest.mark.anyio
async def test_database_from_a_newer_obsmem_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    await seeded(path)
    with blank_connection(path) as conn:
        conn.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} VALUES ('m999_from_the_future', '2030-01-01T00:00:00+00:00')"
        )
        with pytest.raises(MigrationError, match="newer obsmem"):
            migrations.pending(conn)
    async with SQLiteStore(path) as store:
        with pytest.raises(MigrationError, match="m999_from_the_future"):
            await store.get_head(LINEAGE)


# -- locking --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_busy_database_is_retried_then_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A locked database is retried a fixed number of times with a doubling pause, then reported.

    The store's pauses are recorded instead of slept (and the first one is held until the test
    has released the lock), so nothing here depends on how fast the machine is: the bound is the
    number of retries and the sum of their pauses, not a measured time."""
    path = tmp_path / "om.db"
    await seeded(path)
    pauses: list[float] = []
    backing_off, go_on = threading.Event(), threading.Event()

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) > 100:  # a retry loop without end
            raise RuntimeError(f"the store retried a locked database {len(pauses)} times")
        backing_off.set()
        go_on.wait()

    monkeypatch.setattr(sqlite_store, "time", SimpleNamespace(sleep=pause))
    blocker = blank_connection(path)
    try:
        async with SQLiteStore(path, busy_timeout=0.01) as store:
            blocker.execute("BEGIN IMMEDIATE")  # hold the write lock until the store backs off
            pending = asyncio.ensure_future(store.set_working_memory("k", "waited"))
            backed_off = asyncio.ensure_future(asyncio.to_thread(backing_off.wait))
            try:
                await asyncio.wait({pending, backed_off}, return_when=asyncio.FIRST_COMPLETED)
                assert not pending.done(), f"the write gave up at once: {pending.exception()!r}"
            finally:
                backing_off.set()  # frees the waiting thread whatever happened
            blocker.execute("COMMIT")
            go_on.set()
            await pending  # retried after the lock went away
            assert await store.get_working_memory("k") == "waited"
            assert pauses == [0.05]

            pauses.clear()
            blocker.execute("BEGIN IMMEDIATE")  # now hold it past every retry
            with pytest.raises(StorageError, match="locked"):
                await store.set_working_memory("k", "never")
            assert pauses == [0.05 * 2**n for n in range(sqlite_store.BUSY_RETRIES - 1)]
            # each try waits at most busy_timeout inside SQLite: the whole wait stays short
            assert sum(pauses) + sqlite_store.BUSY_RETRIES * store.busy_timeout < 5
            blocker.execute("ROLLBACK")
            assert await store.get_working_memory("k") == "waited"
    finally:
        go_on.set()
        blocker.close()


@pytest.mark.anyio
async def test_two_stores_on_one_file_share_compare_and_set(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    await seeded(path)
    async with SQLiteStore(path) as one, SQLiteStore(path) as two:

        async def increment(store: SQLiteStore) -> None:
            while True:
                head = await store.get_head(LINEAGE)
                assert head is not None
                bumped = head.model_copy(update={"metadata": {"n": head.metadata.get("n", 0) + 1}})
                if (await store.update_record(bumped, expected_version=head.version)).applied:
                    return

        async with asyncio.TaskGroup() as group:
            for i in range(20):
                group.create_task(increment(one if i % 2 else two))
        final = await one.get_head(LINEAGE)
    assert final is not None and final.metadata == {"n": 20} and final.version == 21


# -- several processes ----------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from obsmem.storage import SQLiteStore

    async def main(db: str, me: str, mode: str, rounds: int) -> None:
        async with SQLiteStore(db) as store:
            head = await store.get_head("thread:t1")  # every worker reads version 1 first
            print("ready", flush=True)
            sys.stdin.readline()  # "go", once every worker has read
            if mode == "increment":
                retries = 0
                for _ in range(rounds):
                    while True:
                        n = head.metadata.get("n", 0) + 1
                        bumped = head.model_copy(update={"metadata": {"n": n}})
                        result = await store.update_record(bumped, expected_version=head.version)
                        if result.applied:
                            head = result.record
                            break
                        retries += 1
                        head = result.record  # stale hands back the current head
                print(json.dumps({"retries": retries}))
                return
            if mode == "update":
                bumped = head.model_copy(update={"active_observations": f"by {me}"})
                result = await store.update_record(bumped, expected_version=head.version)
            else:
                successor = head.model_copy(update={"id": f"om-gen-{me}", "active_observations": f"by {me}"})
                result = await store.create_generation(head, successor, expected_version=head.version)
            print(json.dumps({"status": result.status, "id": result.record.id if result.record else None}))

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
    """
)


def run_workers(tmp_path: Path, mode: str, count: int = 2, rounds: int = 0) -> list[dict[str, object]]:
    """Start ``count`` workers, let them all read, then let them all write (a pipe handshake:
    each says "ready" on stdout and waits for "go" on stdin, so no wait is timed)."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    db = tmp_path / "om.db"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), str(i), mode, str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":  # an empty line: it exited before reading
                p.kill()
                raise AssertionError(f"a worker did not start: {p.communicate()[1][-3000:]}")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


@pytest.mark.slow
def test_two_processes_same_expected_version_exactly_one_applies(tmp_path: Path) -> None:
    asyncio.run(seeded(tmp_path / "om.db"))
    results = run_workers(tmp_path, "update")
    assert sorted(str(r["status"]) for r in results) == ["applied", "stale"]

    async def check() -> ObservationRecord | None:
        async with SQLiteStore(tmp_path / "om.db") as store:
            return await store.get_head(LINEAGE)

    head = asyncio.run(check())
    winner = next(i for i, r in enumerate(results) if r["status"] == "applied")
    assert head is not None and head.version == 2 and head.active_observations == f"by {winner}"


@pytest.mark.slow
def test_two_processes_reflecting_at_once_make_one_generation(tmp_path: Path) -> None:
    asyncio.run(seeded(tmp_path / "om.db"))
    results = run_workers(tmp_path, "generation")
    assert sorted(str(r["status"]) for r in results) == ["applied", "stale"]
    winner = next(r for r in results if r["status"] == "applied")

    async def check() -> list[ObservationRecord]:
        async with SQLiteStore(tmp_path / "om.db") as store:
            return await store.list_generations(LINEAGE)

    generations = asyncio.run(check())
    assert [r.id for r in generations] == [winner["id"], "om-1"]
    assert [r.is_live for r in generations] == [True, False]
    assert all(r["id"] == winner["id"] for r in results)  # the loser was handed the new head


@pytest.mark.slow
def test_processes_incrementing_lose_nothing(tmp_path: Path) -> None:
    asyncio.run(seeded(tmp_path / "om.db"))
    results = run_workers(tmp_path, "increment", count=3, rounds=15)
    # All read version 1 before "go": at least two of the three first writes must be stale.
    assert sum(int(str(r["retries"])) for r in results) >= 2

    async def check() -> ObservationRecord | None:
        async with SQLiteStore(tmp_path / "om.db") as store:
            await store.save_messages("t1", [Message.user("still writable")])
            return await store.get_head(LINEAGE)

    head = asyncio.run(check())
    assert head is not None and head.metadata == {"n": 45} and head.version == 46
