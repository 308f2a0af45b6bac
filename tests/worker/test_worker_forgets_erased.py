"""A delete in one process cannot reach another process's memory: an ``obsmem worker`` that
observed a user's messages kept them in its own caches (the store's decoded rows, the token
counter's texts, the engine's windows, the offline roles' lines) after the application deleted
that user, until they were evicted by other work. Every erase now changes the store's erase
token (``obsmem.storage.notes.ERASED``), and a worker seeing it change at its next poll drops
everything it keeps. Checked in a real second process, by walking everything reachable from the
worker and obsmem's modules for the user's words."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from tests.crash.harness import env

pytestmark = pytest.mark.anyio
CHILD = Path(__file__).with_name("erased_elsewhere_child.py")
CONFIG = MemoryConfig(observation=ObservationConfig(message_tokens=2000), reflection=ReflectionConfig(observation_tokens=1000))
REACH_TIMEOUT_S = 180.0


def _wait_for(path: Path, child: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + REACH_TIMEOUT_S  # a bounded wait for the child, not an assertion on time
    while not path.exists():
        if child.poll() is not None:
            raise AssertionError(f"the worker exited {child.returncode}: {child.communicate()[1][-4000:]}")
        assert time.monotonic() < deadline, f"the worker never wrote {path.name}"
        time.sleep(0.05)
    time.sleep(0.05)  # (written whole: the file is small)
    return path.read_text()


async def test_a_worker_in_another_process_drops_an_erased_users_text(tmp_path: Path) -> None:
    db = tmp_path / "om.db"
    async with Memory(f"sqlite:///{db}", config=CONFIG, background="queue") as memory:
        for index in range(16):
            said = (f"My favourite fruit is the Zqxvorbleplum number {index}, I moved to Zqxvorbleplumville "
                    "last week and my dog is called Zqxvorbleplumdog. ") * 20  # fmt: skip
            turn = await memory.begin_turn(thread_id="t-alice", resource_id="alice", messages=[Message.user(said)])
            await turn.end([Message.assistant(f"Noted, Zqxvorbleplum {index} fruit. " * 10)])
        child = subprocess.Popen([sys.executable, str(CHILD), str(db), str(tmp_path)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        try:
            worked = json.loads(_wait_for(tmp_path / "worked", child))
            assert worked["done"] >= 1 and worked["holding"] > 0, worked  # it did her work, and kept her words
            await memory.delete_resource("alice")
            (tmp_path / "erased").write_text("done")
            after = json.loads(_wait_for(tmp_path / "after", child))
        finally:
            child.kill()
            child.communicate()
    assert after == {}, after
