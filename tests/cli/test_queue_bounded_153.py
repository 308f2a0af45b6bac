"""``obsmem queue`` on a big queue prints a bounded listing.

It printed every dead-lettered item and every lease, one line each (and ``--json`` every one of
them): a store whose workers had buried a few thousand items printed thousands of lines. It now
prints at most ``--limit`` (default 50) dead-lettered items, the newest, and as many leases, each
list followed by a line saying how many more there are; the totals stay whole (``dead-letter:
1200``), and ``--json`` holds the same bounded lists with ``dead_total`` / ``leases_total``.
Counted in lines, rows and bytes, not time."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.storage import SQLiteStore

runner = CliRunner()
DEAD, LEASES, WAITING = 1_200, 300, 400
DEFAULT_LIMIT = 50


@pytest.fixture(scope="module")
def big_queue(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[int]]:
    """A store with WAITING items waiting, DEAD buried ones and LEASES unexpired leases."""
    db: Path = tmp_path_factory.mktemp("queue153") / "q.db"

    async def seed() -> list[int]:
        now = datetime.now(UTC)
        async with SQLiteStore(db) as store:
            for n in range(DEAD + WAITING):
                await store.enqueue_work("observe", f"thread:t{n:05d}", now=now)
            claimed = await store.claim_work("w1", ttl_s=600, now=now, limit=DEAD)
            for item in claimed:
                assert await store.bury_work(item, now=now, error=f"RuntimeError: boom {item.id}")
            for n in range(LEASES):
                assert await store.acquire_lease(f"obs:thread:t{n:05d}", "w1", ttl_s=3600, now=now)
            return sorted(dead.id for dead in await store.list_dead_work())

    return f"sqlite:///{db}", asyncio.run(seed())


def _dead_rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "attempts=" in line]


def _lease_rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("  obs:thread:")]


def test_the_listing_is_bounded_and_says_how_many_more(big_queue: tuple[str, list[int]]) -> None:
    url, dead_ids = big_queue
    shown = runner.invoke(app, ["queue", "--store", url])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert len(lines) <= 2 * DEFAULT_LIMIT + 12, f"{len(lines)} lines printed for {DEAD} dead items, {LEASES} leases"
    dead = _dead_rows(shown.stdout)
    assert len(dead) == DEFAULT_LIMIT, len(dead)
    # the newest are shown (the oldest is not), and the totals are the whole queue's
    assert dead[-1].split()[0] == str(dead_ids[-1]) and dead[0].split()[0] == str(dead_ids[-DEFAULT_LIMIT])
    assert f"dead-letter: {DEAD}" in shown.stdout and f"{WAITING} waiting" in shown.stdout
    assert f"{DEAD - DEFAULT_LIMIT} more" in shown.stdout, shown.stdout
    assert len(_lease_rows(shown.stdout)) == DEFAULT_LIMIT
    assert f"leases: {LEASES} (0 expired)" in shown.stdout
    assert f"{LEASES - DEFAULT_LIMIT} more" in shown.stdout, shown.stdout


def test_limit_sets_how_many_are_listed(big_queue: tuple[str, list[int]]) -> None:
    url, dead_ids = big_queue
    shown = runner.invoke(app, ["queue", "--store", url, "--limit", "7"])
    assert shown.exit_code == 0, shown.output
    dead = _dead_rows(shown.stdout)
    assert [int(line.split()[0]) for line in dead] == dead_ids[-7:]
    assert len(_lease_rows(shown.stdout)) == 7
    assert f"{DEAD - 7} more" in shown.stdout and f"{LEASES - 7} more" in shown.stdout
    refused = runner.invoke(app, ["queue", "--store", url, "--limit", "0"])
    assert refused.exit_code == 2, refused.output


def test_json_is_bounded_too(big_queue: tuple[str, list[int]]) -> None:
    url, dead_ids = big_queue
    shown = runner.invoke(app, ["queue", "--store", url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert len(shown.stdout) < 40_000, f"{len(shown.stdout):,} bytes of JSON"
    document = json.loads(shown.stdout)
    assert [dead["id"] for dead in document["dead"]] == dead_ids[-DEFAULT_LIMIT:]
    assert document["dead_total"] == DEAD
    assert len(document["leases"]) == DEFAULT_LIMIT and document["leases_total"] == LEASES
    assert document["leases_expired"] == 0
    assert document["kinds"]["observe"]["waiting"] == WAITING
    limited = json.loads(runner.invoke(app, ["queue", "--store", url, "--json", "--limit", "3"]).stdout)
    assert len(limited["dead"]) == 3 and len(limited["leases"]) == 3 and limited["dead_total"] == DEAD


def test_a_small_queue_is_listed_whole(tmp_path: Path) -> None:
    db = tmp_path / "small.db"

    async def seed() -> None:
        now = datetime.now(UTC)
        async with SQLiteStore(db) as store:
            for n in range(3):
                await store.enqueue_work("observe", f"t{n}", now=now)
            for item in await store.claim_work("w1", ttl_s=60, now=now, limit=3):
                await store.bury_work(item, now=now, error="boom")

    asyncio.run(seed())
    shown = runner.invoke(app, ["queue", "--store", f"sqlite:///{db}"])
    assert shown.exit_code == 0, shown.output
    assert len(_dead_rows(shown.stdout)) == 3 and "more" not in shown.stdout
    document = json.loads(runner.invoke(app, ["queue", "--store", f"sqlite:///{db}", "--json"]).stdout)
    assert len(document["dead"]) == 3 and document["dead_total"] == 3 and document["leases_total"] == 0
