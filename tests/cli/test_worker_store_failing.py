"""``obsmem worker --exit-when-idle`` (or ``--drain``) on a store that keeps failing: a run meant
to end ends, with one error line and status 1, once the store has failed for ``--store-patience``
seconds (default 60). Before, it retried forever
(with backoff up to 30 s), so a cron job or a CI step using it never finished. A worker run
without those flags still rides a store outage out (it retries; not tested here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("flag", ["--exit-when-idle", "--drain"])
def test_a_worker_meant_to_end_ends_on_a_store_that_keeps_failing(tmp_path: Path, flag: str) -> None:
    damaged = tmp_path / "m.db"
    damaged.write_bytes(b"this is not a database, it only ends in .db\n" * 200)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "obsmem", "worker", "--store", str(damaged), flag, "--poll", "0.01",
             "--store-patience", "1"],
            capture_output=True, text=True, timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"obsmem worker {flag} was still retrying a store that keeps failing after 120 s")
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a database" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
