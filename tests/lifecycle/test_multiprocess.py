"""Four OS processes, 250 turns each, one thread, one shared store: nothing lost, nothing twice.

Run on one SQLite file and on one PostgreSQL database.

Each worker (``mp_worker.py``, run with this interpreter) opens its own ``Memory`` on the shared
file with the offline observer, small thresholds and buffering on, so buffers, activations,
synchronous observations and reflections of four engines race through the store only. After
every worker exits cleanly the stored state must satisfy the lifecycle invariants.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.storage.contract import Store
from obsmem.storage.postgres.store import PostgresStore
from obsmem.storage.sqlite.store import SQLiteStore

from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401
from .invariants import check_thread

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("mp_worker.py")
PROCESSES = int(os.environ.get("OBSMEM_MP_PROCESSES", "4"))
TURNS = int(os.environ.get("OBSMEM_MP_TURNS", "250"))
TIMEOUT_S = 240


def run_workers(db: Path | str) -> tuple[list[dict[str, object]], float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(db), str(n), str(TURNS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for n in range(PROCESSES)
    ]
    reports: list[dict[str, object]] = []
    failures: list[str] = []
    for n, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            out, err = proc.communicate()
            failures.append(f"worker {n} did not finish within {TIMEOUT_S}s\n{err[-4000:]}")
            continue
        if proc.returncode != 0:
            failures.append(f"worker {n} exited with {proc.returncode}\n{err[-6000:]}")
            continue
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert not failures, "\n\n".join(failures)
    return reports, time.perf_counter() - started


async def test_four_processes_share_one_thread_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    await check_shared_run(db, SQLiteStore(db))


async def test_four_processes_share_one_thread_on_postgres(postgres_url: str) -> None:  # noqa: F811
    await check_shared_run(postgres_url, PostgresStore(postgres_url))


async def check_shared_run(target: Path | str, store: Store) -> None:
    reports, seconds = run_workers(target)
    for report in reports:
        assert report["background_errors"] == [], report

    expected = [f"p{n}-{kind}{i}" for n in range(PROCESSES) for i in range(TURNS) for kind in ("u", "a")]
    try:
        stored = await store.list_messages("shared")
        ids = [m.id for m in stored]
        assert len(ids) == len(set(ids)), "a message is stored twice"
        lost = sorted(set(expected) - set(ids))
        assert not lost, f"{len(lost)} messages lost: {lost[:20]}"
        assert len(ids) == len(expected) == PROCESSES * TURNS * 2

        memory = Memory(store)  # the store stays open: it was passed in
        context = await memory.get_context("shared")
        snapshot = await check_thread(store, "shared", "u1", context=context, expected_ids=expected)
        generations = await store.list_generations("thread:shared", limit=10_000)
        assert sum(1 for g in generations if g.superseded_by is None) == 1
        await memory.aclose()

        # The run must have exercised the concurrent paths, not just appended messages.
        events: dict[str, int] = {}
        for report in reports:
            worker_events = report["events"]
            assert isinstance(worker_events, dict)
            for kind, count in worker_events.items():
                events[kind] = events.get(kind, 0) + count
        assert snapshot.cursor > 0, snapshot.brief()
        assert events.get("buffer-end", 0) > 0 and events.get("activation", 0) > 0, events
        retries = sum(int(str(report.get("contention_retries", 0))) for report in reports)
        print(f"\n{store!r}: {PROCESSES} processes x {TURNS} turns in {seconds:.1f}s: {snapshot.brief()}; "
              f"{events}; turns repeated after a lost observation race: {retries}")
    finally:
        await store.close()
