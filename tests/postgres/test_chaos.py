"""Issue 22, what it must show: operating obsmem on PostgreSQL under faults, bounded, loopback only.

Application tasks in queue mode write turns into a throwaway PostgreSQL cluster of their own
while ``obsmem worker`` processes buffer them; workers are killed (SIGKILL) at random and
replaced, and the server is restarted once in the middle. Then ``obsmem worker --drain`` runs.
Afterwards: every message exactly once in its thread's context, nothing dead-lettered (no work
really failed), no application error that is not an ``ObsmemError`` (and, thanks to the store's
reconnect-and-retry, none at all across the restart), and no password in any log line.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from obsmem import Memory, ObsmemError
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Message, TextPart

from ..lifecycle.invariants import check_thread
from ..pg_cluster import THROWAWAY_SETTINGS, PostgresCluster, _run, start_cluster
from .worker_config import config

pytestmark = pytest.mark.anyio
SENTINEL = "Chaos5entinelPw"
CHAOS_WORKER = Path(__file__).parent / "chaos_worker.py"
APPS, TURNS, WORKERS, KILLS = 4, 12, 3, 4
SEED = 22


def restart(cluster: PostgresCluster) -> None:
    """A fast restart, as an operator's ``pg_ctl restart`` or a failover does: every connection drops."""
    _run(cluster, ["pg_ctl", "-D", str(cluster.data_dir), "-m", "fast", "-w", "-t", "60", "stop"])
    options = {**THROWAWAY_SETTINGS, "listen_addresses": "127.0.0.1"}
    flags = " ".join(f"-c {k}={v}" for k, v in options.items())
    _run(cluster, ["pg_ctl", "-D", str(cluster.data_dir), "-l", str(cluster.log_file), "-w", "-t", "60",
                   "-o", f"-p {cluster.port} -k {cluster.root} {flags}", "start"])


class Workers:
    def __init__(self, url: str, snapshot: Path, logs: Path) -> None:
        self.url, self.snapshot, self.logs = url, snapshot, logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        log = (self.logs / f"worker-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, str(CHAOS_WORKER), "2", "worker", "--store", self.url, "--config", str(self.snapshot),
             "--poll", "0.05", "--claim-ttl", "2", *extra],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def stop_all(self) -> None:
        for proc in self.live():
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def application(url: str, app: int, errors: list[BaseException]) -> dict[str, list[str]]:
    """One application process's work: its threads, turn after turn, in queue mode."""
    written: dict[str, list[str]] = {}
    async with PostgresStore(url) as store:
        memory = Memory(store, config=config(), background="queue")
        async with memory:
            for turn_no in range(TURNS):
                thread_id = f"a{app}-t{turn_no % 2}"
                user = Message(id=f"{thread_id}-u{turn_no}", role="user", parts=(TextPart(
                    text=f"Turn {turn_no} of app {app}: the Kestrel{turn_no} budget is {turn_no * 10} euros."),))
                reply = Message(id=f"{thread_id}-r{turn_no}", role="assistant", parts=(TextPart(
                    text=f"Noted {turn_no * 10} euros for Kestrel{turn_no} (app {app})."),))  # fmt: skip
                try:
                    turn = await memory.begin_turn(thread_id=thread_id, resource_id=f"u{app}", messages=[user])
                    await turn.step([reply])
                    await turn.end()
                except ObsmemError as exc:  # typed: allowed, counted (the restart should not cause any)
                    errors.append(exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - the test's point: there must be none
                    errors.append(exc)
                    continue
                written.setdefault(thread_id, []).extend([user.id, reply.id])
                await asyncio.sleep(0.2)
    return written


async def test_chaos_drain_leaves_every_message_once_and_no_secret(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cluster = start_cluster()
    try:
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE chaos")
        url = cluster.url("chaos").replace("postgres@", f"postgres:{SENTINEL}@")  # trust auth: any password
        async with PostgresStore(url) as store:
            await store.migrate()
        snapshot, logs = tmp_path / "config.json", tmp_path / "logs"
        snapshot.write_text(json.dumps(config().snapshot()))
        logs.mkdir()
        workers = Workers(url, snapshot, logs)
        for _ in range(WORKERS):
            workers.start()

        errors: list[BaseException] = []
        apps = [asyncio.create_task(application(url, n, errors)) for n in range(APPS)]
        kills = 0
        restarted = False
        while not all(task.done() for task in apps):
            await asyncio.sleep(0.4)
            if kills == 2 and not restarted:  # in the middle: the server restarts under everyone
                await asyncio.to_thread(restart, cluster)
                restarted = not all(task.done() for task in apps)
            elif kills < KILLS:
                victim = rng.choice(workers.live())
                os.kill(victim.pid, signal.SIGKILL)
                victim.wait()
                kills += 1
                workers.start()
        written: dict[str, list[str]] = {}
        for task in apps:
            written.update(await task)
        workers.stop_all()
        assert restarted, "the applications finished before the restart: raise TURNS"

        drain = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, str(CHAOS_WORKER), "2", "worker", "--store", url, "--config", str(snapshot), "--drain",
             "--timeout", "240", "--poll", "0.05", "--claim-ttl", "2"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert drain.returncode == 0, drain.stdout + drain.stderr
        assert kills >= 2

        assert [e for e in errors if not isinstance(e, ObsmemError)] == []
        assert errors == []  # the restart was absorbed by reconnect-and-retry
        async with PostgresStore(url) as store:
            assert await store.list_work() == []
            assert await store.list_dead_work() == []  # nothing really failed, so nothing is dead-lettered
            memory = Memory(store, config=config())
            for thread_id, ids in sorted(written.items()):
                context = await memory.get_context(thread_id)
                await check_thread(store, thread_id, f"u{thread_id[1]}", context=context, expected_ids=ids)
                assert [m.id for m in await store.list_messages(thread_id)] == ids  # once each, in order
            await memory.aclose()
        assert sum(len(ids) for ids in written.values()) == APPS * TURNS * 2

        output = drain.stdout + drain.stderr + "".join(p.read_text(errors="replace") for p in logs.iterdir())
        assert SENTINEL not in output
    finally:
        cluster.stop()
