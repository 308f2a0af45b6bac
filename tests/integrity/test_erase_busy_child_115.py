"""An erase ends the offline roles' *idle* child interpreters (2e0ee8d), so what a deleted user's
jobs left in a child's caches goes with it. A child busy at that moment (another user's large
window being observed in it) was left alone, then went back to the idle children when its job
finished: the child that had observed Alice's window earlier kept her text after
``delete_resource("alice")``, for the life of the process. A child taken before an erase must
not be kept once its job is done (ending it then, or not handing it out again)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.om.offline import offload

pytestmark = pytest.mark.anyio


def _large(name: str) -> str:
    return " ".join(f"On day {i} I fed {name} number {i} at the harbour." for i in range(700))  # ~40k chars


async def test_a_child_busy_during_an_erase_does_not_keep_the_erased_users_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OBSMEM_OFFLINE_PROCESS", raising=False)
    await asyncio.to_thread(offload.end_idle_children)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=30_000, max_tokens_per_batch=50_000))
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}", config=config) as memory:
        turn = await memory.begin_turn(thread_id="t-alice", resource_id="alice",
                                       messages=[Message.user(_large("Zqxalicedog"))])
        await turn.end([Message.assistant("ok")])
        await memory.observe("t-alice")
        await memory.settled()
        served_alice = {child.process.pid for child in offload._CHILDREN.idle}
        assert served_alice, "observed in a child, which waits for the next job"
        turn = await memory.begin_turn(thread_id="t-bob", resource_id="bob",
                                       messages=[Message.user(_large("Zqxbobdog"))])
        await turn.end([Message.assistant("ok")])

        # Bob's window is observed in that child; Alice is deleted while it runs.
        started, release = threading.Event(), threading.Event()
        real = offload._Child.run

        def held(self: Any, payload: bytes) -> Any:
            result = real(self, payload)
            started.set()
            release.wait(20)
            return result

        monkeypatch.setattr(offload._Child, "run", held)
        bob = asyncio.create_task(memory.observe("t-bob"))
        assert await asyncio.to_thread(started.wait, 20)
        await memory.delete_resource("alice")
        release.set()
        await bob
        await memory.settled()

        kept = {child.process.pid for child in offload._CHILDREN.idle if child.process.poll() is None}
        assert not kept & served_alice, "the child that observed Alice's window is still waiting for work"
