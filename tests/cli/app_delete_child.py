"""An application's own ``Memory.delete_resource("alice")`` (no CLI, no REST) that stops inside
it, both thread rows gone, the second thread's data not yet: a delete under way in a live process
(run as a script by tests/cli/test_app_delete_under_way.py, not collected).

    python app_delete_child.py <sqlite file> <coordination folder>

At its point it writes ``<folder>/at`` and never returns; the test kills it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from obsmem.memory import Memory

DB, FOLDER = sys.argv[1], Path(sys.argv[2])
real = Memory._drop_thread_data
calls = 0


async def drop(self: Memory, *args: Any, **kwargs: Any) -> dict[str, int]:
    global calls
    calls += 1
    if calls == 2:
        (FOLDER / "at").write_text("under way")
        while True:
            await asyncio.sleep(3600)
    return await real(self, *args, **kwargs)


Memory._drop_thread_data = drop  # type: ignore[method-assign]


async def main() -> None:
    async with Memory(f"sqlite:///{DB}") as memory:
        await memory.delete_resource("alice")


asyncio.run(main())
