"""``obsmem queue --limit N`` reads a bounded number of queue rows, on every store.

The listing printed was bounded (``--limit``), but the store was read whole to make it: every
work item (for the per-kind depth), every dead-lettered item and every lease (for the totals),
so with thousands of each, ``obsmem queue --limit 5`` read thousands of rows. The depth and the
totals are now counted by the store (SQL ``COUNT``/``MIN``), and only the rows printed are read.
Counted in rows handed out by the store's methods, not time."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.cli.queue import queue_snapshot
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

WAITING, CLAIMED, DEAD, LEASES, EXPIRED = 240, 30, 150, 80, 20
LIMIT = 5
#: Rows a bounded listing may read: the dead items and leases it prints, one row per kind, slack.
BOUND = 2 * LIMIT + 10
_SKIP = {"close", "migrate", "__aenter__", "__aexit__"}


def _rows(found: Any) -> int:
    """Rows in what a method returned: a stored object is one, a count (a number) none."""
    if isinstance(found, list | tuple):
        return sum(_rows(one) for one in found)
    return 0 if found is None or isinstance(found, bool | int | float | str) else 1


def count_rows(target: Any, setattr_: Callable[[Any, str, Any], None]) -> dict[str, int]:
    """Wrap every public coroutine method of ``target`` (a store class or instance) so the rows
    each hands out are counted, by method name."""
    read: dict[str, int] = {}
    cls = target if isinstance(target, type) else type(target)
    for name, function in inspect.getmembers(cls, inspect.iscoroutinefunction):
        if name.startswith("_") and name not in _SKIP or name in _SKIP:
            continue

        def wrap(real: Any, name: str = name) -> Any:
            async def counted(*args: Any, **kwargs: Any) -> Any:
                found = await real(*args, **kwargs)
                read[name] = read.get(name, 0) + _rows(found)
                return found

            return counted

        if isinstance(target, type):
            setattr_(target, name, wrap(function))
        else:
            setattr_(target, name, wrap(getattr(target, name)))
    return read


async def seed(store: Store) -> datetime:
    now = datetime.now(UTC)
    for n in range(WAITING + CLAIMED + DEAD):
        await store.enqueue_work("observe", f"t{n:05d}", now=now)
    for n in range(7):
        await store.enqueue_work("reflect", f"r{n}", now=now - timedelta(seconds=90), delay_s=3600)
    claimed = await store.claim_work("w1", ttl_s=600, now=now, kinds=("observe",), limit=CLAIMED + DEAD)
    for item in claimed[:DEAD]:
        assert await store.bury_work(item, now=now, error=f"boom {item.id}")
    for n in range(LEASES):
        ttl = 1.0 if n < EXPIRED else 3600.0
        assert await store.acquire_lease(f"obs:thread:t{n:05d}", "w1", ttl_s=ttl, now=now - timedelta(seconds=10))
    return now


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    adapter: Store
    if request.param == "memory":
        adapter = MemoryStore()
    elif request.param == "sqlite":
        adapter = SQLiteStore(tmp_path / "queue.db")
    else:
        adapter = PostgresStore(request.getfixturevalue("postgres_url"), max_size=5, migrate=False)
    async with adapter:
        yield adapter


async def test_a_bounded_snapshot_reads_a_bounded_number_of_rows(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    now = await seed(store)
    whole = await queue_snapshot(store, now, limit=None)  # the reference: every row
    read = count_rows(store, monkeypatch.setattr)
    snapshot = await queue_snapshot(store, now, limit=LIMIT)
    assert sum(read.values()) <= BOUND, f"{read} rows read for a listing of {LIMIT}"
    # what it says is the whole queue's
    assert snapshot["kinds"] == whole["kinds"]
    assert snapshot["kinds"]["observe"] == {"waiting": WAITING, "due": WAITING, "claimed": CLAIMED,
                                            "expired_claims": 0, "oldest_age_s": 0.0}  # fmt: skip
    assert snapshot["kinds"]["reflect"] == {"waiting": 7, "due": 0, "claimed": 0, "expired_claims": 0,
                                            "oldest_age_s": 90.0}  # fmt: skip
    assert snapshot["dead_total"] == DEAD and snapshot["dead"] == whole["dead"][-LIMIT:]
    assert (snapshot["leases_total"], snapshot["leases_expired"]) == (LEASES, EXPIRED)
    assert snapshot["leases"] == whole["leases"][:LIMIT]


async def test_obsmem_queue_limit_reads_what_it_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "cli.db"
    async with SQLiteStore(db) as seeded:
        await seed(seeded)
    read = count_rows(SQLiteStore, monkeypatch.setattr)
    shown = await anyio.to_thread.run_sync(
        lambda: CliRunner().invoke(app, ["queue", "--store", f"sqlite:///{db}", "--limit", str(LIMIT)])
    )
    assert shown.exit_code == 0, shown.output
    assert sum(read.values()) <= BOUND, f"{read} rows read for `obsmem queue --limit {LIMIT}`"
    assert f"queue: {WAITING + 7} waiting, {CLAIMED} claimed" in shown.stdout
    assert f"dead-letter: {DEAD}" in shown.stdout and f"leases: {LEASES} ({EXPIRED} expired)" in shown.stdout
    assert len([line for line in shown.stdout.splitlines() if "attempts=" in line]) == LIMIT


async def test_obsmem_queue_on_postgres_reads_what_it_prints(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with PostgresStore(postgres_url, max_size=5, migrate=False) as seeded:
        await seed(seeded)
    read = count_rows(PostgresStore, monkeypatch.setattr)
    shown = await anyio.to_thread.run_sync(
        lambda: CliRunner().invoke(app, ["queue", "--store", postgres_url, "--limit", str(LIMIT), "--json"])
    )
    assert shown.exit_code == 0, shown.output
    assert sum(read.values()) <= BOUND, f"{read} rows read for `obsmem queue --limit {LIMIT} --json`"
    assert f'"dead_total": {DEAD}' in shown.stdout and f'"leases_total": {LEASES}' in shown.stdout
