"""A memory without knowledge agents deleting a thread: its lane rows (written by a worker or an
earlier process that ran the agents) still go, but the knowledge package is not imported for it.
b5ddae5 moved that import (numpy, pydantic models: half a second) to a thread, yet module
execution holds the interpreter lock: the first delete_thread still held the event loop about
0.1 s (a loop-lag probe, /tmp/h177/imp/lag.py: 126-138 ms, 1.5-4 ms with the module already
loaded). The lanes are looked up first (the index and the thread's rows, a few reads); the
package is loaded only when the thread has any."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.knowledge.agents import LANE_PREFIX
from obsmem.knowledge.agents.lanes import LANE_AGENTS

pytestmark = pytest.mark.anyio

SCRIPT = r"""
import asyncio, json, sys
from obsmem import Memory, Message


async def main(folder):
    async with Memory(f"sqlite:///{folder}/memory.db") as memory:
        for thread in ("a", "b"):
            turn = await memory.begin_turn(thread_id=thread, resource_id="alice", messages=[Message.user("hi")])
            await turn.end([Message.assistant("hello")])
        await memory.delete_thread("a")
        await memory.delete_resource("alice")


asyncio.run(main(sys.argv[1]))
print(json.dumps(sorted(name for name in sys.modules if name.startswith("obsmem.knowledge"))))
"""


def test_deleting_without_knowledge_loads_no_knowledge_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_key_names_match_the_lanes() -> None:
    from obsmem import memory

    assert (memory._LANE_PREFIX, memory._LANE_AGENTS) == (LANE_PREFIX, LANE_AGENTS)


@pytest.mark.parametrize("rows", ["all", "index only", "one lane, no index"])
async def test_a_deleted_threads_lanes_still_go(tmp_path: Path, rows: str) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'memory.db'}") as memory:
        for thread in ("t1", "t2"):
            turn = await memory.begin_turn(thread_id=thread, resource_id="alice", messages=[Message.user("hi")])
            await turn.end([Message.assistant("hello")])
        store = memory.store
        names = [f"{agent}:{thread}" for agent in LANE_AGENTS for thread in ("t1", "t2")]
        if rows != "one lane, no index":
            await store.set_working_memory(LANE_PREFIX + "index", json.dumps(sorted(names)))
        if rows != "index only":
            for name in names if rows == "all" else ["learn:t1", "learn:t2"]:
                await store.set_working_memory(LANE_PREFIX + name, json.dumps({"cursor": 3}))
        await memory.delete_thread("t1")
        left = [n for n in names if await store.get_working_memory(LANE_PREFIX + n) is not None]
        index = json.loads(await store.get_working_memory(LANE_PREFIX + "index") or "[]")
        assert all(not n.endswith(":t1") for n in [*left, *index])
        if rows == "all":
            assert left == [f"{agent}:t2" for agent in LANE_AGENTS] and index == sorted(left)
