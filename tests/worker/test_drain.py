"""Issue 22 §2: ``obsmem worker --drain`` ends only with an empty queue and no lease held.

A worker is killed (SIGKILL) in the middle of a buffer, holding the item's claim and the
thread's buffer lease; ``--exit-when-idle`` would stop at once (nothing is due). ``--drain``
waits out the dead worker's claim and lease, takes the work over and exits 0 with the queue
empty and every message buffered.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from obsmem.clock import SystemClock
from obsmem.storage import SQLiteStore
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import WORK_OBSERVE

from ..postgres.worker_config import config

WORKER_PROC = Path(__file__).parent.parent / "postgres" / "worker_proc.py"
SENTENCES = [
    "Meeting with the Kestrel team moved to Thursday at 10am in room 4B.",
    "The Kestrel budget for the second quarter is 48,000 euros, approved by Dana.",
    "Jonas prefers summaries as bullet points and wants the risks listed first.",
    "The vendor contract for the data warehouse renews on the 1st of September.",
]


async def seed(db: Path) -> list[str]:
    async with SQLiteStore(db) as store:
        ids: list[str] = []
        for thread_id in ("t1", "t2"):
            await store.create_thread(Thread(id=thread_id, resource_id="u1"))
            stored = await store.save_messages(thread_id, [
                Message(id=f"{thread_id}-m{i}", role="user" if i % 2 == 0 else "assistant",
                        parts=(TextPart(text=f"{SENTENCES[i % len(SENTENCES)]} (turn {i})"),))
                for i in range(8)
            ])  # fmt: skip
            ids += [m.id for m in stored]
            await store.enqueue_work(WORK_OBSERVE, thread_id, now=SystemClock().now())
        return ids


async def state(db: Path) -> tuple[int, int, set[str]]:
    async with SQLiteStore(db) as store:
        work = await store.list_work()
        dead = await store.list_dead_work()
        covered: set[str] = set()
        for thread_id in ("t1", "t2"):
            head = await store.get_head(f"thread:{thread_id}")
            if head is not None:
                covered |= {mid for chunk in head.buffered_chunks for mid in chunk.message_ids}
        return len(work), len(dead), covered


def test_drain_after_a_killed_worker_ends_with_an_empty_queue(tmp_path: Path) -> None:
    db, signals, snapshot = tmp_path / "q.db", tmp_path / "signals", tmp_path / "config.json"
    signals.mkdir()
    snapshot.write_text(json.dumps(config().snapshot()))
    ids = asyncio.run(seed(db))
    url = f"sqlite:///{db}"

    # Worker A claims t1's item, takes its buffer lease (3 s here) and blocks in the observer; killed there.
    proc = subprocess.Popen([sys.executable, str(WORKER_PROC), url, str(signals), "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        # Worker A says "blocked" from inside the observer (its stdout ends if it exits first).
        if "blocked\n" not in iter(proc.stdout.readline, ""):
            raise AssertionError(f"worker A exited early: {proc.communicate()[1][-3000:]}")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    waiting, _, _ = asyncio.run(state(db))
    assert waiting == 2  # t1's (claimed by the dead worker) and t2's

    drained = subprocess.run(
        [sys.executable, "-m", "obsmem.cli", "worker", "--store", url, "--config", str(snapshot), "--drain",
         "--timeout", "300", "--poll", "0.05", "--claim-ttl", "2"],
        capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert "drained" in drained.stdout
    waiting, dead, covered = asyncio.run(state(db))
    assert (waiting, dead) == (0, 0)
    assert covered == set(ids)  # the dead worker's thread too: every message buffered, none lost


def test_the_buffer_lease_time_is_an_option() -> None:
    """``Worker(lease_ttl_s=...)`` / ``obsmem worker --lease-ttl``: a dead worker's buffer lease
    frees after that long (the default stays 60 s); a non-positive value is a ConfigError."""
    import pytest
    from typer.testing import CliRunner

    from obsmem.cli import app
    from obsmem.errors import ConfigError
    from obsmem.storage import MemoryStore
    from obsmem.worker import Worker

    worker = Worker(MemoryStore(), lease_ttl_s=5)
    assert worker.engine.buffered is not None and worker.engine.buffered.lease_ttl_s == 5
    assert Worker(MemoryStore()).engine.buffered.lease_ttl_s == 60  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="lease_ttl_s"):
        Worker(MemoryStore(), lease_ttl_s=0)
    assert "--lease-ttl" in CliRunner().invoke(app, ["worker", "--help"], terminal_width=200).output
