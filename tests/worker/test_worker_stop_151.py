"""``obsmem worker`` stopped while an item's model call hangs: the first SIGTERM / Ctrl-C lets the
items in progress finish; a second one must end the worker at once, giving its claim back to the
queue (its attempt counted, due at once) and releasing the thread's buffer lease, so that another worker
takes the work over right away and nothing is lost. Before, every further signal was ignored: the
worker could only be killed (SIGKILL), leaving its claim and lease to expire."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.storage import SQLiteStore

OBSMEM = str(Path(sys.executable).parent / "obsmem")
#: How long the test waits for the worker to react at all (a hang, not a speed check: the model
#: call it interrupts never answers, and its own timeout is longer).
PATIENCE_S = 45.0


def _config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=0.25, block_after=3.0),
        reflection=ReflectionConfig(observation_tokens=5_000),
    )


async def _application(db: Path) -> None:
    async with SQLiteStore(db) as store:
        async with Memory(store, config=_config(), clock=FakeClock(), background="queue") as memory:
            for n in range(10):
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                               messages=[Message.user(f"Turn {n}: the Kestrel{n} budget is {n * 100} euros")])  # fmt: skip
                await turn.step([Message.assistant(f"Noted {n * 100} euros for Kestrel{n}.")])
                await turn.end()


async def _queue_state(db: Path) -> tuple[list[tuple[str, str | None, int]], list[str], int]:
    async with SQLiteStore(db) as store:
        work = [(item.kind, item.claimed_by, item.attempts) for item in await store.list_work()]
        leases = [lease.key for lease in await store.list_leases() if lease.key.startswith("buffer")]
        dead = len(await store.list_dead_work())
    return work, leases, dead


class _SilentModel:
    """An OpenAI-compatible server that takes every request and never answers."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self) -> None:
        for connection in self.connections:
            connection.close()
        self.server.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_gives_the_hung_item_back_and_ends_the_worker(tmp_path: Path, sig: signal.Signals) -> None:
    db, snapshot = tmp_path / "app.db", tmp_path / "config.json"
    snapshot.write_text(json.dumps(_config().snapshot()))
    asyncio.run(_application(db))
    model = _SilentModel()
    env = dict(os.environ, VLLM_BASE_URL=f"http://127.0.0.1:{model.port}/v1")
    worker = subprocess.Popen(
        [OBSMEM, "worker", "--store", str(db), "--config", str(snapshot), "--model", "vllm:x", "--poll", "0.05"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + PATIENCE_S
        while not model.connections and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.05)
        assert model.connections, "the worker never called the model"
        worker.send_signal(sig)  # finish the items in progress ...
        time.sleep(0.5)
        assert worker.poll() is None  # ... which it is still doing (the model has not answered)
        worker.send_signal(sig)  # ... no: stop now
        try:
            out, err = worker.communicate(timeout=PATIENCE_S)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, err = worker.communicate()
            pytest.fail(f"the worker ignored the second {sig.name}:\n{out}\n{err}")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
        model.close()
    assert worker.returncode == 0, (out, err)
    assert "1 given back" in out, out
    work, leases, dead = asyncio.run(_queue_state(db))
    # the item waits for the next worker, unclaimed, its attempt counted; no lease is left
    assert ("observe", None, 1) in work and all(claimed is None for _, claimed, _ in work), work
    assert leases == [] and dead == 0, (leases, dead)
    # and the next worker (offline) does the work at once: nothing was lost
    done = subprocess.run(
        [OBSMEM, "worker", "--store", str(db), "--config", str(snapshot), "--exit-when-idle", "--poll", "0.01"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0 claimed" not in done.stdout and "0 lost claims" in done.stdout, done.stdout
    assert asyncio.run(_queue_state(db)) == ([], [], 0)


def test_a_worker_out_of_time_gives_its_hung_item_back(tmp_path: Path) -> None:
    """``--timeout S`` ends the worker in the middle of an item's model call: the item goes back to
    the queue (unclaimed, its attempt counted) and its buffer lease is released; before, the
    item stayed claimed by the exited worker and its lease held, both until they expired."""
    db, snapshot = tmp_path / "app.db", tmp_path / "config.json"
    snapshot.write_text(json.dumps(_config().snapshot()))
    asyncio.run(_application(db))
    model = _SilentModel()
    env = dict(os.environ, VLLM_BASE_URL=f"http://127.0.0.1:{model.port}/v1")
    try:
        done = subprocess.run(
            [OBSMEM, "worker", "--store", str(db), "--config", str(snapshot), "--model", "vllm:x", "--poll", "0.05",
             "--timeout", "3"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        model.close()
    assert model.connections, "the worker never called the model"
    assert done.returncode == 0, done.stderr
    assert "1 given back" in done.stdout, done.stdout
    work, leases, dead = asyncio.run(_queue_state(db))
    assert ("observe", None, 1) in work and all(claimed is None for _, claimed, _ in work), work
    assert leases == [] and dead == 0, (leases, dead)
