"""SQLite leases and the m002 upgrade: what only a file shared by several stores and processes shows.

The lease rules themselves are tested once for every adapter in ``tests/conformance``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem.storage import Lease, SQLiteStore, lineage_key, migrations
from obsmem.storage.migrations import MIGRATIONS_TABLE, SQLITE, MigrationSet
from obsmem.types import Thread

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TTL = 30.0
KEY = "obs:thread:t1"
LINEAGE = lineage_key("thread", "t1", "r1")


# -- upgrading a database made before m002 -------------------------------------------------------


def make_m001_database(path: Path) -> None:
    """A database exactly as the release with only ``m001_initial`` left it, holding one record."""
    only_m001 = MigrationSet(SQLITE)
    only_m001.register(migrations.m001_initial)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert only_m001.migrate(conn) == ["m001_initial"]
        at = T0.isoformat()
        conn.execute(
            "INSERT INTO threads (id, resource_id, metadata, created_at, created_us, updated_at, version) "
            "VALUES ('t1', 'r1', '{}', ?, 0, ?, 1)",
            (at, at),
        )
        conn.execute(
            "INSERT INTO observation_records (id, lineage, scope, thread_id, resource_id, generation, "
            "origin, version, superseded_by, created_at, updated_at, active_observations, "
            "observation_tokens, total_tokens_observed, pending_message_tokens, threads, "
            "buffered_chunks, buffered_reflection, reflection_suppressed_at, config, metadata) "
            "VALUES ('om-old', ?, 'thread', 't1', 'r1', 0, 'initial', 3, NULL, ?, ?, '* old fact', "
            "4, 120, 35, '{\"t1\": {\"cursor\": 7}}', '[]', NULL, NULL, '{}', '{}')",
            (LINEAGE, at, at),
        )
        assert migrations.pending(conn) == ["m002_leases_and_boundaries", "m003_work_queue", "m004_dead_work", "m005_model_calls",
            "m006_message_rev", "m007_threads_by_creation", "m008_thread_activity", "m009_forgotten_ids"]
    finally:
        conn.close()


@pytest.mark.anyio
async def test_m001_database_is_upgraded_and_old_records_read_back(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    make_m001_database(path)

    async with SQLiteStore(path) as store:
        old = await store.get_head(LINEAGE)
        assert old is not None
        assert old.id == "om-old" and old.version == 3 and old.cursor("t1") == 7
        assert old.active_observations == "* old fact" and old.pending_message_tokens == 35
        assert (old.buffer_boundary_tokens, old.reflection_boundary_tokens) == (0, 0)

        # The upgraded row takes the new fields like any other, and leases work.
        moved = await store.update_record(
            old.model_copy(update={"buffer_boundary_tokens": 35, "reflection_boundary_tokens": 4}),
            expected_version=3,
        )
        assert moved.applied and moved.record is not None
        assert (moved.record.buffer_boundary_tokens, moved.record.reflection_boundary_tokens) == (35, 4)
        lease = await store.acquire_lease(KEY, "engine-a", ttl_s=TTL, now=T0)
        assert lease is not None and lease.token == 1

    with sqlite3.connect(path) as conn:
        names = [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY name")]
        assert names == ["m001_initial", "m002_leases_and_boundaries", "m003_work_queue", "m004_dead_work", "m005_model_calls",
            "m006_message_rev", "m007_threads_by_creation", "m008_thread_activity", "m009_forgotten_ids"]
        assert migrations.pending(conn) == []
        row = conn.execute(
            "SELECT buffer_boundary_tokens, reflection_boundary_tokens FROM observation_records"
        ).fetchone()
        assert row == (35, 4)


def test_m002_applies_once_when_run_again(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    make_m001_database(path)
    with sqlite3.connect(path, isolation_level=None) as conn:
        assert migrations.migrate(conn) == ["m002_leases_and_boundaries", "m003_work_queue", "m004_dead_work", "m005_model_calls",
            "m006_message_rev", "m007_threads_by_creation", "m008_thread_activity", "m009_forgotten_ids"]
        assert migrations.migrate(conn) == []
        assert conn.execute("SELECT COUNT(*) FROM lease_tokens").fetchone()[0] == 1


# -- several stores and processes on one file ------------------------------------------------------


@pytest.mark.anyio
async def test_stores_on_one_file_race_and_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    stores = [SQLiteStore(path) for _ in range(4)]
    try:
        for store in stores:  # open and migrate every connection before the race
            await store.get_lease(KEY)
        results = await asyncio.gather(
            *(s.acquire_lease(KEY, f"engine-{i}", ttl_s=TTL, now=T0) for i, s in enumerate(stores))
        )
        winners = [lease for lease in results if lease is not None]
        assert len(winners) == 1
        for store in stores:
            assert await store.get_lease(KEY) == winners[0]
    finally:
        for store in stores:
            await store.close()


@pytest.mark.anyio
async def test_tokens_keep_rising_across_reopen_and_release(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    async with SQLiteStore(path) as store:
        first = await store.acquire_lease(KEY, "engine-a", ttl_s=TTL, now=T0)
        assert first is not None
        assert await store.release_lease(KEY, "engine-a")
    async with SQLiteStore(path) as store:
        assert await store.get_lease(KEY) is None
        second = await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=T0)
        assert second is not None and second.token > first.token


WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from datetime import datetime
    from obsmem.storage import SQLiteStore

    async def main(db: str, me: str, now: str, mode: str) -> None:
        async with SQLiteStore(db) as store:
            await store.get_lease("warm-up")  # open and migrate before the race
            print("ready", flush=True)
            sys.stdin.readline()  # "go", once every worker is ready
            lease = await store.acquire_lease(
                "obs:thread:t1", f"proc-{me}", ttl_s=30, now=datetime.fromisoformat(now)
            )
            print(json.dumps(lease.model_dump(mode="json") if lease else None), flush=True)
            if mode == "crash":  # hold the lease and die without releasing or closing
                time.sleep(600)

    asyncio.run(main(*sys.argv[1:5]))
    """
)


def start_workers(
    tmp_path: Path, db: Path, now: datetime, count: int, mode: str = "race"
) -> list[subprocess.Popen[str]]:
    """``count`` workers, each past its warm-up, then all let go at once (a pipe handshake: each
    says "ready" on stdout and waits for "go" on stdin, so no wait is timed)."""
    script = tmp_path / "lease_worker.py"
    script.write_text(WORKER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), str(i), now.isoformat(), mode],
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
            if p.stdout.readline().strip() != "ready":  # an empty line: it exited before the race
                p.kill()
                raise AssertionError(f"a worker did not start: {p.communicate()[1][-3000:]}")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
    except BaseException:
        for p in procs:
            p.kill()
        raise
    return procs


def race(tmp_path: Path, db: Path, now: datetime, count: int = 4) -> list[Lease | None]:
    procs = start_workers(tmp_path, db, now, count)
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    return [Lease.model_validate(r) if r is not None else None for r in results]


def stored_lease(db: Path) -> Lease | None:
    async def read() -> Lease | None:
        async with SQLiteStore(db) as store:
            return await store.get_lease(KEY)

    return asyncio.run(read())


@pytest.mark.slow
def test_four_processes_race_for_one_lease_exactly_one_wins(tmp_path: Path) -> None:
    db = tmp_path / "om.db"
    first = [lease for lease in race(tmp_path, db, T0) if lease is not None]
    assert len(first) == 1
    assert stored_lease(db) == first[0]

    # Still held: a second race before expiry is won by nobody but the holder's own process.
    assert [lease for lease in race(tmp_path, db, T0 + timedelta(seconds=TTL - 1)) if lease] == [
        first[0].model_copy(update={"expires_at": T0 + timedelta(seconds=2 * TTL - 1)})
    ]

    # Expired: exactly one process takes it over, with a higher fencing token.
    later = T0 + timedelta(seconds=3 * TTL)
    second = [lease for lease in race(tmp_path, db, later) if lease is not None]
    assert len(second) == 1 and second[0].token > first[0].token and second[0].acquired_at == later
    assert stored_lease(db) == second[0]


@pytest.mark.slow
def test_lease_of_a_crashed_holder_blocks_until_it_expires(tmp_path: Path) -> None:
    db = tmp_path / "om.db"
    (holder,) = start_workers(tmp_path, db, T0, count=1, mode="crash")
    try:
        assert holder.stdout is not None
        held = Lease.model_validate(json.loads(holder.stdout.readline()))
    finally:
        holder.kill()  # SIGKILL: no release, no close
        holder.communicate(timeout=30)
    assert held.owner == "proc-0"

    async def after_crash() -> tuple[Lease | None, Lease | None, Lease | None]:
        async with SQLiteStore(db) as store:
            await store.create_thread(Thread(id="t1", resource_id="r1"))  # the file is writable
            early, on_expiry = T0 + timedelta(seconds=TTL - 1), T0 + timedelta(seconds=TTL)
            refused = await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=early)
            taken = await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=on_expiry)
            return refused, taken, await store.get_lease(KEY)

    refused, taken, stored = asyncio.run(after_crash())
    assert refused is None
    assert taken is not None and taken.owner == "engine-b" and taken.token > held.token
    assert stored == taken
