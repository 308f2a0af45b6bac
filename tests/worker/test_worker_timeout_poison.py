"""Since 7343bc4/99ec501, ``obsmem worker --timeout S`` that ends in the middle of an item's model
call gives the item back "due now, attempt not counted". A worker run on a schedule
(``--timeout 300`` from cron or a Kubernetes CronJob) whose model call for one item always takes
longer than S (the model transport's own timeout is 600 s) then takes the same item first on every
run, forever: its attempts never grow, so it never reaches max attempts and the dead-work list,
and the queue behind it waits. Before 7343bc4 the claim stayed until its expiry and every claim
counted an attempt, so such an item was dead-lettered after max attempts.

A stop now keeps the attempt (the item is still due at once), so it reaches the dead-work list
like any item that keeps failing (found by helper-152).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from tests.worker.test_worker_stop_151 import OBSMEM, _application, _config, _queue_state, _SilentModel


def test_an_item_that_always_outlasts_the_timeout_is_counted(tmp_path: Path) -> None:
    db, snapshot = tmp_path / "app.db", tmp_path / "config.json"
    snapshot.write_text(json.dumps(_config().snapshot()))
    asyncio.run(_application(db))
    model = _SilentModel()
    env = dict(os.environ, VLLM_BASE_URL=f"http://127.0.0.1:{model.port}/v1")
    try:
        for _ in range(3):  # three scheduled runs
            subprocess.run([OBSMEM, "worker", "--store", str(db), "--config", str(snapshot), "--model", "vllm:x",
                            "--poll", "0.05", "--timeout", "2"], env=env, capture_output=True, text=True, timeout=120)
    finally:
        model.close()
    work, _, _ = asyncio.run(_queue_state(db))
    attempts = [n for kind, _, n in work if kind == "observe"]
    assert attempts and attempts[0] >= 3, f"three runs each stopped mid-item, attempts counted: {work}"
