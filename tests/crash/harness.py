"""Running a crash-test app process (:mod:`tests.crash.crash_child`) up to a named point and
SIGKILLing it there, and checking what a user would check afterwards.

Every wait is bounded: a child that never reaches its point, or exits instead, fails the test
with its stderr (never waited out by an assertion on time).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("crash_child.py")
REACH_TIMEOUT_S = 180.0


def env() -> dict[str, str]:
    src = str(Path(__file__).parents[2] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def kill_at(scenario: str, db: Path, folder: Path) -> str:
    """Run the child for ``scenario`` until it writes ``at``, then SIGKILL it; the point it
    reached."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), scenario, str(db), str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    deadline = time.monotonic() + REACH_TIMEOUT_S
    try:
        while not (folder / "at").exists():
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"{scenario}: the app exited {proc.returncode} before its point\n{err[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{scenario}: the app never reached its point")
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    return str(json.loads((folder / "at").read_text()))


def read(folder: Path, name: str, default: Any) -> Any:
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else default
