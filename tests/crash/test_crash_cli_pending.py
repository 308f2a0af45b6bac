"""What ``obsmem threads`` says about an app's thread after the app was SIGKILLed inside an
observation: 12 messages (about 300 tokens) wait to be observed, ``Memory.status`` says so, and
the ``pending`` column says 0.

The column shows the head record's ``pending_message_tokens``, which only an observation's
commit writes (the killed one never did; a thread below its threshold shows 0 as well), not the
unobserved window that ``Memory.status`` counts (``window_tokens``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from obsmem import Memory

from .crash_child import config
from .harness import env, kill_at

pytestmark = pytest.mark.anyio


async def test_obsmem_threads_says_how_much_waits_after_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at("sync-observe", db, tmp_path / "run")
    async with Memory(f"sqlite:///{db}", config=config(buffered=False)) as memory:
        status = await memory.status("t1")
    assert status.unobserved_messages > 0 and status.window_tokens > 0

    shown = subprocess.run([sys.executable, "-m", "obsmem", "threads", "--store", str(db)],
                           capture_output=True, text=True, env={**env(), "COLUMNS": "200"}, timeout=120)

    assert shown.returncode == 0, shown.stderr
    row = next(line.split() for line in shown.stdout.splitlines() if line.split()[:1] == ["t1"])
    # thread resource messages observed pending generations updated
    assert int(row[4].replace(",", "")) == status.window_tokens
