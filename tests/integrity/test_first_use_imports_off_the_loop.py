"""A process's first turn and first delete must not hold up the event loop with imports: the
OpenTelemetry API (50-100 ms with the package metadata read for its version) was imported on
the loop at the first turn, and the knowledge package (half a second, numpy among it) at the first
delete of a thread by a memory without knowledge agents: every other request the process served
waited that long. Checked in a fresh interpreter (nothing imported yet) with an import hook that
records the modules imported on the event loop's thread once the Memory is open."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import asyncio, importlib.abc, json, sys, threading

on_loop = []
phase = ["setup"]


class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if phase[0] != "setup" and threading.current_thread() is threading.main_thread() and name not in sys.modules:
            on_loop.append([phase[0], name])
        return None


sys.meta_path.insert(0, Spy())
from obsmem import Memory, Message


async def main(folder):
    async with Memory(f"sqlite:///{folder}/memory.db") as memory:
        phase[0] = "first turn"
        turn = await memory.begin_turn(thread_id="a", resource_id="alice", messages=[Message.system("Be brief."), Message.user("hi")])
        await turn.step([Message.assistant("hello")])
        await turn.end()
        phase[0] = "turns"
        for i in range(30):
            turn = await memory.begin_turn(thread_id="a", messages=[Message.user(f"plan leg {i} of the trip " * 30)])
            await turn.step([Message.assistant("noted " * 40)])
            await turn.end()
        await memory.settled()
        await memory.get_context("a")
        phase[0] = "delete thread"
        await memory.delete_thread("a")
        phase[0] = "delete resource"
        turn = await memory.begin_turn(thread_id="b", resource_id="alice", messages=[Message.user("again")])
        await turn.end()
        await memory.delete_resource("alice")
        phase[0] = "setup"


asyncio.run(main(sys.argv[1]))
print(json.dumps([entry for entry in on_loop if not entry[1].startswith("encodings.")]))
"""


def test_first_turn_and_first_delete_import_nothing_on_the_event_loop(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == [], f"imported on the event loop: {imported[:20]} ({len(imported)} modules)"
