"""One process of the eraser-race tests of review 132 (run as a script, not collected).

    python worker_132.py paused_forget <store URL> <process number> <coordination folder>

``args.json`` in the folder says what to forget (``value``, ``thread_id`` or ``resource_id``,
``scope``) and where to pause (``method``: the store method whose first call stops, after the
forget read what it rewrites, until ``go`` is in the folder; ``rewriting`` marks the stop).
Prints one JSON line: whether it paused and what went wrong (``errors``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from obsmem import Memory, MemoryConfig, ObsmemError

sys.path.insert(0, str(Path(__file__).parent))
from hostile_109_worker import mark, wait_for  # noqa: E402

# The store method a forget writes with, and the one it wrote with before compare-and-set (a
# store without the first): the pause is at whichever the store has.
FALLBACK = {"replace_working_memory": "set_working_memory", "rewrite_message": "save_messages",
            "rewrite_generation": "rewrite_generation"}


async def paused_forget(url: str, n: int, folder: Path) -> dict[str, Any]:
    args = json.loads((folder / "args.json").read_text())
    errors: list[str] = []
    paused: list[bool] = []
    async with Memory(url, config=MemoryConfig(scope=args.get("scope", "thread"))) as memory:
        store = memory.store
        name = args["method"] if hasattr(store, args["method"]) else FALLBACK[args["method"]]
        method = getattr(store, name)

        async def pausing(*call: Any, **kwargs: Any) -> Any:
            if not paused:
                paused.append(True)
                mark(folder, "rewriting")
                await asyncio.to_thread(wait_for, folder, "go")
            return await method(*call, **kwargs)

        setattr(store, name, pausing)
        try:
            await memory.forget(args["value"], thread_id=args.get("thread_id"), resource_id=args.get("resource_id"))
        except ObsmemError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return {"paused": bool(paused), "errors": errors}


SCENARIOS = {"paused_forget": paused_forget}

if __name__ == "__main__":
    scenario, url, number, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    print(json.dumps(asyncio.run(SCENARIOS[scenario](url, number, folder))))
