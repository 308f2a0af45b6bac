"""An ``obsmem worker`` process (a Worker on the store, in this process) that runs the memory
work queued for alice, says so, waits while another process erases her, runs its next poll,
then prints where her text is still reachable in this process (run as a script by
tests/worker/test_worker_forgets_erased.py, not collected).

    python erased_elsewhere_child.py <sqlite file> <coordination folder>"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from obsmem.storage import open_store
from obsmem.worker import Worker
from tests.integrity.test_long_lived_113 import MARK, _holding
from tests.worker.test_worker_forgets_erased import CONFIG

DB, FOLDER = sys.argv[1], Path(sys.argv[2])


async def main() -> None:
    store = open_store(f"sqlite:///{DB}")
    async with store:
        worker = Worker(store, config=CONFIG)
        stats = await worker.run(exit_when_idle=True)
        (FOLDER / "worked").write_text(json.dumps({"done": stats.completed, "holding": len(_holding(worker, MARK))}))  # type: ignore[arg-type]
        deadline = time.monotonic() + 120
        while not (FOLDER / "erased").exists():
            assert time.monotonic() < deadline, "the erase never came"
            await asyncio.sleep(0.05)
        await worker.run(exit_when_idle=True)  # its next poll: nothing queued for anyone
        (FOLDER / "after").write_text(json.dumps(_holding(worker, MARK)))  # type: ignore[arg-type]


asyncio.run(main())
