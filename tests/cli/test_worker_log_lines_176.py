"""``obsmem worker`` logs the work it does to stderr, naming the thread: a thread id is whatever the
application chose (a user's chat title, say), and it went to the operator's terminal and log files
raw. An ESC sequence recoloured the terminal, a bidi override reordered the line, and a newline in
the id wrote a second log line of the id's own making (a forged "ERROR" record). Each line is one
line now, what a terminal would obey spelled (``\\x1b``, ``\\u202e``, ``\\x0a``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from obsmem import Memory, Message
from obsmem.storage import open_store

THREAD = "t\x1b[31mRED\u202eevil\n2026-01-01 00:00:00,000 ERROR obsmem forged"


def test_worker_log_lines_show_a_thread_id_spelled(tmp_path: Path) -> None:
    db = tmp_path / "w.db"

    async def seed() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread(THREAD, "alice")
            await memory.save_messages(THREAD, [Message.user("hello " * 400), Message.assistant("ok " * 400)] * 3)
        async with open_store(f"sqlite:///{db}") as store:
            await store.enqueue_work("observe", THREAD, now=datetime.now(UTC))

    asyncio.run(seed())
    # a memory model nobody answers (a closed local port): the observation fails and is logged
    run = subprocess.run(
        [sys.executable, "-m", "obsmem", "worker", "--store", str(db), "--exit-when-idle",
         "--model", "openai-compatible:m@http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120, env={"OPENAI_API_KEY": "x", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stderr and "\u202e" not in run.stderr, ascii(run.stderr)
    assert not any(line.startswith("2026-01-01") for line in run.stderr.splitlines()), run.stderr
    failed = [line for line in run.stderr.splitlines() if "failed" in line and "observation" in line]
    assert failed, run.stderr
    assert "t\\x1b[31mRED\\u202eevil\\x0a2026-01-01" in failed[0], failed[0]
