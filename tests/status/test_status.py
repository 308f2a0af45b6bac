"""``Memory.status`` and ``Memory.watch`` from the user's side (issue 21): the state machine's
state, read from the store, while real buffering runs with a model that answers when told."""

from __future__ import annotations

import asyncio

import pytest

from obsmem import Memory, Message
from obsmem.models.base import ModelRequest
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio

CONFIG = {
    "observation": {"message_tokens": 400, "buffer_tokens": 0.25, "block_after": 2.0},
    "reflection": {"observation_tokens": 5_000},
}
OBSERVATION = "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User talked about the garden: beans and tomatoes.\n</observations>"


class Gated:
    """An observer that answers only when the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.started_calls: list[int] = []

    async def __call__(self, messages: list[Message], settings: ModelRequest | None) -> str:
        self.started_calls.append(len(messages))
        self.started.set()
        await self.gate.wait()
        return OBSERVATION


def _text(i: int) -> str:
    return f"Message {i}: the beans in bed {i} need water, and the tomatoes by the fence need stakes of {i} cm."


async def test_status_follows_a_buffer_from_start_to_activation() -> None:
    gated = Gated()
    kinds: list[str] = []
    async with Memory(observer=FunctionModel(gated), reflector="offline", config=CONFIG, max_turn_wait=None,
                      on_event=lambda event: kinds.append(event.kind)) as memory:
        fresh = await memory.create_thread("t", resource_id="r")
        status = await memory.status(fresh.id)
        assert status.phase == "idle" and status.window_tokens == 0 and status.record_id is None
        assert status.message_threshold == 400 and status.block_after == 800

        i = 0
        while not gated.started.is_set():  # talk until a buffer starts (it waits at the gate)
            turn = await memory.begin_turn(thread_id="t", messages=[Message.user(_text(i))])
            await turn.end([Message.assistant(f"Noted {i}.")])
            i += 1
            await asyncio.sleep(0)
        status = await memory.status("t")
        assert "buffer-observation" in status.in_flight
        assert status.phase == "buffering"
        assert 0 < status.window_tokens < status.message_threshold
        assert status.buffered == ()

        gated.gate.set()
        await memory.settled()
        status = await memory.status("t")
        assert status.in_flight == {}
        assert len(status.buffered) == 1
        chunk = status.buffered[0]
        assert 1 <= chunk.first_seq <= chunk.last_seq and chunk.message_tokens > 0
        assert status.buffered_message_tokens == chunk.message_tokens

        # messages saved without a turn take the window past the threshold: activation is due,
        # and the next turn activates the buffered chunk instead of calling the observer
        while (await memory.status("t")).window_tokens < status.message_threshold:
            await memory.save_messages("t", [Message.user(_text(i)), Message.assistant(f"Noted {i}.")])
            i += 1
        due = await memory.status("t")
        assert due.phase == "activation-due" and due.observation_tokens == 0 and len(due.buffered) == 1
        kinds.clear()
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user(_text(i))])
        await turn.end([Message.assistant(f"Noted {i}.")])
        await memory.settled()
        after = await memory.status("t")
        assert after.observation_tokens > 0
        assert all(b.first_seq > chunk.last_seq for b in after.buffered)
        assert after.window_tokens < due.window_tokens
        assert "activation" in kinds and "observation-start" not in kinds  # no synchronous observation
        assert after.data()["thread_id"] == "t"  # JSON-ready


async def test_watch_yields_each_change_of_state() -> None:
    gated = Gated()
    async with Memory(observer=FunctionModel(gated), reflector="offline", config=CONFIG, max_turn_wait=None) as memory:
        await memory.create_thread("t", resource_id="r")
        statuses = []

        async def watch() -> None:
            async for status in memory.watch("t", interval_s=0.01):
                statuses.append(status)
                if status.buffered:
                    return

        watcher = asyncio.create_task(watch())
        i = 0
        while not gated.started.is_set():
            turn = await memory.begin_turn(thread_id="t", messages=[Message.user(_text(i))])
            await turn.end([Message.assistant(f"Noted {i}.")])
            i += 1
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)
        gated.gate.set()
        await asyncio.wait_for(watcher, 10)
        phases = [s.phase for s in statuses]
        assert phases[0] == "idle" and "buffering" in phases
        # a status is yielded only when the state changed
        assert not any(a.same_state(b) for a, b in zip(statuses, statuses[1:]))


async def test_status_of_an_unknown_thread_is_a_typed_error() -> None:
    import pytest

    from obsmem.errors import ThreadNotFoundError

    async with Memory() as memory:
        with pytest.raises(ThreadNotFoundError):
            await memory.status("nope")


async def test_a_thread_does_not_show_the_work_of_a_thread_whose_id_extends_its_own() -> None:
    from datetime import timedelta

    async with Memory("memory://") as memory:
        await memory.create_thread("t1", resource_id="r")
        await memory.create_thread("t10", resource_id="r")
        now = memory.clock.now()
        lease = await memory.store.acquire_lease("buffer-observation:thread:t10", "someone", ttl_s=60, now=now)
        assert lease is not None
        assert (await memory.status("t10")).in_flight == {"buffer-observation": lease.expires_at}
        assert (await memory.status("t1")).in_flight == {}
        assert lease.expires_at - now == timedelta(seconds=60)
