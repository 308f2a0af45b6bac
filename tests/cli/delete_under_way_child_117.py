"""A process running the real ``obsmem delete-resource alice`` (the command's own code, in this
process), or with ``app`` an application's own ``Memory.delete_resource("alice")``, that stops
inside it, both thread rows gone, the second thread's data not yet: a delete under way (run as a
script by tests/cli/test_delete_under_way_117.py and test_app_delete_under_way.py, not collected).

    python delete_under_way_child_117.py <sqlite file> <coordination folder> [app]

At its point it writes ``<folder>/at`` and never returns; the test kills it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from obsmem.cli import main
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


async def app() -> None:
    async with Memory(f"sqlite:///{DB}") as memory:
        await memory.delete_resource("alice")


Memory._drop_thread_data = drop  # type: ignore[method-assign]
if sys.argv[3:] == ["app"]:
    asyncio.run(app())
else:
    sys.argv = ["obsmem", "delete-resource", "alice", "--store", DB, "--yes"]
    main()
