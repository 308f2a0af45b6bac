"""A worker process for the crash test (run as a script, not collected).

    python worker_proc.py <store url> <signal dir> [<buffer lease seconds>]

Runs one :class:`obsmem.worker.Worker` whose observer, when called, writes ``<signal dir>/blocked``,
says ``blocked`` on stdout (the test waits for that line, not for time to pass) and then waits
forever: the test kills this process with SIGKILL while it is in the middle of a buffer, holding
the work item's claim and the thread's buffer lease.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage import open_store
from obsmem.tokens import TokenCounter
from obsmem.worker import Worker

sys.path.insert(0, str(Path(__file__).parent))
from worker_config import CLAIM_TTL_S, config


class BlockingObserver:
    name = "blocking"

    def __init__(self, signal_dir: Path) -> None:
        self.signal_dir = signal_dir
        self.inner = OfflineObserver(count_tokens=TokenCounter().count_text)

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        (self.signal_dir / "blocked").write_text(str(len(request.messages)))
        print("blocked", flush=True)
        await asyncio.Event().wait()  # until killed
        return await self.inner.observe(request)  # pragma: no cover


async def main(url: str, signal_dir: Path) -> None:
    async with open_store(url) as store:
        worker = Worker(store, config=config(), observer=BlockingObserver(signal_dir), claim_ttl_s=CLAIM_TTL_S,
                        poll_interval_s=0.1, owner="worker-A")
        (signal_dir / "owner").write_text(worker.engine_owner or "")
        await worker.run(max_items=1)


if __name__ == "__main__":
    if len(sys.argv) > 3:  # a shorter buffer lease, so a test waits out the dead worker's lease sooner
        import obsmem.om.buffering

        obsmem.om.buffering.LEASE_TTL_S = float(sys.argv[3])
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
