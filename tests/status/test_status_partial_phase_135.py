"""helper-133: a status of a window longer than WINDOW_READ (2,000 messages) decides its phase on
the first 2,000 messages only. With short messages the 2,000 read stay under the threshold, so
the status says phase 'idle' (nothing due) while the thread's window is far past the threshold
(and past block_after: the next turn waits on an observation). The inspector / watch / REST
/status show a thread about to block as idle."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio
START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _messages(count: int) -> list[Message]:
    return [
        Message(id=f"s{i:05d}", role="user" if i % 2 == 0 else "assistant",
                parts=(TextPart(text=f"Note {i}: the beans in bed {i % 40} need water."),),
                created_at=START + timedelta(seconds=i))
        for i in range(count)
    ]


async def test_status_of_a_window_past_its_threshold_is_not_idle(tmp_path: Path) -> None:
    config = MemoryConfig(observation=ObservationConfig(message_tokens=60_000))
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}", config=config) as memory:
        await memory.create_thread("t1", "alice")
        messages = _messages(10_000)
        await memory.save_messages("t1", messages)
        total = sum(memory.counter.count_message(m) for m in messages)
        status = await memory.status("t1")
        assert total >= status.message_threshold, (total, status.message_threshold)
        assert status.data()["window_partial"] is True
        # the whole window is past the threshold: something is due, the thread is not idle
        assert status.phase != "idle", (status.window_tokens, status.message_threshold, status.block_after)


OBSERVATION = "<observations>\nDate: Jun 15, 2025\n* 🔴 (09:00) User talked about the garden beds.\n</observations>"


async def test_the_estimate_is_near_the_whole_window_and_decides_the_phase(tmp_path: Path) -> None:
    """helper-135: after an observation (cursor > 0), with another thread's messages between
    this thread's (seq is shared), the estimate of 6,000 unobserved short messages is within 10%
    of their count, past block_after: blocked. A partial window of tiny messages whose estimate
    stays under the threshold stays idle (a long window is not assumed due)."""
    from obsmem.models.testing import FunctionModel

    async def observer(messages: list[Message], settings: object) -> str:
        return OBSERVATION

    config = MemoryConfig(observation=ObservationConfig(message_tokens=60_000))
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}", config=config, observer=FunctionModel(observer),
                      reflector="offline") as memory:
        await memory.create_thread("t1", "alice")
        await memory.create_thread("t2", "alice")
        await memory.save_messages("t1", _messages(50))
        await memory.observe("t1")
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        later = [m.model_copy(update={"id": f"l{m.id}"}) for m in _messages(6_000)]
        for start in range(0, 6_000, 500):  # the two threads take turns: t1's seqs are not dense
            await memory.save_messages("t1", later[start : start + 500])
            await memory.save_messages("t2", [m.model_copy(update={"id": f"o{start}{m.id}"}) for m in _messages(300)])
        total = sum(memory.counter.count_message(m) for m in later)
        status = await memory.status("t1")
        assert status.window_partial and status.window_tokens < status.message_threshold
        assert status.window_estimate is not None and abs(status.window_estimate - total) < total / 10, (
            status.window_estimate, total)
        assert status.phase == "blocked", (status.window_estimate, status.block_after)

        await memory.create_thread("t3", "alice")
        tiny = [Message(id=f"t{i:05d}", role="user", parts=(TextPart(text="ok"),),
                        created_at=START + timedelta(seconds=i)) for i in range(2_500)]
        await memory.save_messages("t3", tiny)
        small = await memory.status("t3")
        assert small.window_partial and small.window_estimate is not None
        assert small.window_estimate < small.message_threshold
        assert small.phase == "idle"


def test_the_timeline_panel_shows_the_estimate_of_a_partial_window() -> None:
    from obsmem.om.status import ThreadStatus
    from obsmem.server.ui.receipts import status_panel

    status = ThreadStatus(thread_id="t1", resource_id="alice", scope="thread", phase="blocked",
                          window_tokens=37_000, unobserved_messages=2_000, window_partial=True,
                          window_estimate=185_000, message_threshold=60_000, block_after=72_000)
    assert "at least 37000 of 60000 tokens (about 185000 in all)" in status_panel(status)
