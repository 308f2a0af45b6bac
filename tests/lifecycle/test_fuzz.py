"""Seeded lifecycle fuzzing: two engines share one store; 40 random operations per seed.

Operations: user / assistant messages of varied sizes, tool calls (answered one or two ops later,
or never), steps, buffers finishing / crashing / being cancelled in a drawn order, activation,
reflection (automatic and manual), idleness past the activation TTL and past the lease TTL,
provider changes, a dead worker holding a lease, an engine restarting, failing synchronous
observations, and (in-memory store) operations of both engines interleaved inside each other.
Every invariant of :mod:`tests.lifecycle.invariants` is checked after every operation, every
record the store accepts is checked as it is written, and the final state is checked again
after all background work settled. See :mod:`tests.lifecycle.fuzz` for the machinery.

Seeds: ``OBSMEM_FUZZ_SEEDS`` (default 500) on ``MemoryStore``, ``OBSMEM_FUZZ_SQLITE_SEEDS``
(default 50) on ``SQLiteStore`` and ``OBSMEM_FUZZ_POSTGRES_SEEDS`` (default 50) on
``PostgresStore`` (a fresh database per seed, copied from the migrated template in ~20 ms). The
SQL stores run in the fuzzer's one-chain-at-a-time mode (``sqlite=True``: their I/O timing is
not the event loop's to control). ``OBSMEM_FUZZ_SEED_BASE`` shifts the range to explore new seeds.
A failure names the seed and prints its op log; ``OBSMEM_FUZZ_ONLY=<seed>`` reruns just that one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from obsmem.storage.memory import MemoryStore
from obsmem.storage.postgres.store import PostgresStore
from obsmem.storage.sqlite.store import SQLiteStore

from ..postgres_fixtures import PostgresServer, database_url, postgres_server  # noqa: F401
from .fuzz import FuzzFailure, LifecycleFuzz, run_seed

pytestmark = pytest.mark.anyio

MEMORY_SEEDS = int(os.environ.get("OBSMEM_FUZZ_SEEDS", "500"))
SQLITE_SEEDS = int(os.environ.get("OBSMEM_FUZZ_SQLITE_SEEDS", "50"))
POSTGRES_SEEDS = int(os.environ.get("OBSMEM_FUZZ_POSTGRES_SEEDS", "50"))
SEED_BASE = int(os.environ.get("OBSMEM_FUZZ_SEED_BASE", "0"))
ONLY = os.environ.get("OBSMEM_FUZZ_ONLY")
BATCH = 50


def batches(total: int) -> list[range]:
    if ONLY is not None:
        return [range(int(ONLY), int(ONLY) + 1)]
    starts = range(0, total, BATCH)
    return [range(SEED_BASE + start, SEED_BASE + min(start + BATCH, total)) for start in starts]


def batch_id(seeds: range) -> str:
    return f"seeds{seeds.start}-{seeds.stop - 1}"


@pytest.fixture(autouse=True)
def _quiet_obsmem_warnings() -> Iterator[None]:
    """Injected crashes log a warning each; thousands of them would only bury a real failure."""
    logger = logging.getLogger("obsmem")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def report(failures: list[tuple[int, str]], total: int, store: str) -> None:
    if failures:
        seeds = [seed for seed, _ in failures]
        pytest.fail(
            f"{len(failures)} of {total} {store} seeds broke an invariant: {seeds}\n"
            f"(rerun one with OBSMEM_FUZZ_ONLY=<seed>)\n\nfirst failure:\n{failures[0][1]}",
            pytrace=False,
        )


#: Operations and engine paths every batch of in-memory seeds must reach, so the fuzzer cannot
#: quietly become vacuous (40 seeds reach each of them many times over).
EXPECTED_OPS = {"user", "assistant", "tool_call", "tool_result", "step", "release", "crash", "activate",
                "observe", "reflect", "idle", "provider", "race", "concurrent", "waited_step"}
EXPECTED_EVENTS = {
    "buffer-end", "buffer-dropped", "buffer-failed", "activation:threshold", "activation:ttl",
    "activation:provider_change", "observation-end", "observation-failed", "reflection-end",
    "reflection-buffered", "reflection-activated",
}


@pytest.mark.parametrize("seeds", batches(MEMORY_SEEDS), ids=batch_id)
async def test_lifecycle_fuzz_on_memory_store(seeds: range) -> None:
    failures: list[tuple[int, str]] = []
    runs: list[LifecycleFuzz] = []
    for seed in seeds:
        try:
            runs.append(await run_seed(seed, MemoryStore(), sqlite=False))
        except FuzzFailure as exc:
            failures.append((seed, str(exc)))
            if exc.fuzz is not None:
                runs.append(exc.fuzz)
    report(failures, len(seeds), "MemoryStore")
    if len(seeds) >= 40:
        ops = {op for run in runs for op, n in run.stats.items() if n}
        events = {kind for run in runs for kind, n in run.events.items() if n}
        assert EXPECTED_OPS <= ops, f"operations never drawn: {sorted(EXPECTED_OPS - ops)}"
        assert EXPECTED_EVENTS <= events, f"engine paths never reached: {sorted(EXPECTED_EVENTS - events)}"


@pytest.mark.parametrize("seeds", batches(SQLITE_SEEDS), ids=batch_id)
async def test_lifecycle_fuzz_on_sqlite_store(seeds: range, tmp_path: Path) -> None:
    failures: list[tuple[int, str]] = []
    for seed in seeds:
        store = SQLiteStore(tmp_path / f"fuzz-{seed}.db")
        try:
            await run_seed(seed, store, sqlite=True)
        except FuzzFailure as exc:
            failures.append((seed, str(exc)))
        finally:
            await store.close()
    report(failures, len(seeds), "SQLiteStore")


@pytest.mark.parametrize("seeds", batches(POSTGRES_SEEDS), ids=batch_id)
async def test_lifecycle_fuzz_on_postgres_store(seeds: range, postgres_server: PostgresServer) -> None:  # noqa: F811
    failures: list[tuple[int, str]] = []
    for seed in seeds:
        name = postgres_server.create_database("obsmem_fuzz")
        store = PostgresStore(database_url(postgres_server.url, name), max_size=4, migrate=False)  # template is migrated
        try:
            await run_seed(seed, store, sqlite=True)
        except FuzzFailure as exc:
            failures.append((seed, str(exc)))
        finally:
            await store.close()
            postgres_server.drop_database(name)
    report(failures, len(seeds), "PostgresStore")


async def _trace(seed: int, *, sqlite: bool, tmp_path: Path, run: int) -> list[str]:
    store = SQLiteStore(tmp_path / f"det-{seed}-{run}.db") if sqlite else MemoryStore()
    try:
        fuzz = LifecycleFuzz(seed, store, sqlite=sqlite)
        try:
            await fuzz.run()
        except FuzzFailure:
            pass  # determinism is about the trace, whatever it ends in
        return fuzz.log + [repr(sorted(fuzz.events.items())), repr(fuzz.violations)]
    finally:
        await store.close()


@pytest.mark.parametrize("sqlite", [False, True], ids=["memory", "sqlite"])
async def test_a_seed_is_one_exact_run(sqlite: bool, tmp_path: Path) -> None:
    """Same seed, same operations, same interleavings, same states: a failure always reproduces."""
    for seed in (3, 144):
        first = await _trace(seed, sqlite=sqlite, tmp_path=tmp_path, run=1)
        second = await _trace(seed, sqlite=sqlite, tmp_path=tmp_path, run=2)
        assert first == second
