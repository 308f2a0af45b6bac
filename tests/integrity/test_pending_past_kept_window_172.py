"""A window past the kept window (more than MAX_MESSAGES pending, a memory model down for hours)
is shown as its whole-window cut would show it, read alone or not (helper-172).

cbc14b3 reads only the newest messages of such a window and counts the older ones from the
engine's last whole read. Two ways that went wrong, from the user's side:

* ``Memory.get_context`` cuts the window as stored, and a cut keeps the system messages of the
  part it leaves out (the application's instructions, stored at the thread's start): read alone,
  the newest messages had none of them, so the context lost its instructions; and the count left
  out skipped marker-only messages the whole cut counts.
* another process (a second worker, an import) adding messages to the thread after the last
  whole read: those before the newest read were neither read nor counted, so ``trimmed`` fell
  short of what is pending.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.models.testing import FunctionModel
from obsmem.om.windows import MAX_MESSAGES
from obsmem.types import DataPart

from tests.integrity.test_pending_window_work import _down

pytestmark = pytest.mark.anyio

INSTRUCTIONS = "You are Acme's support agent. Never promise a refund."


def _options() -> dict[str, Any]:
    down = FunctionModel(_down, name="test:down")
    return {
        "config": MemoryConfig(observation=ObservationConfig(message_tokens=3_000)),
        "observer": down, "reflector": down, "max_turn_wait": 0.01,
    }


async def _backlog(memory: Memory, *, system: bool, markers: bool) -> None:
    await memory.create_thread("t1", "alice")
    backlog = [Message.system(INSTRUCTIONS)] if system else []
    for i in range((MAX_MESSAGES + 4_000) // 2):
        backlog += [Message.user(f"Question {i} about the shipment?"), Message.assistant(f"Answer {i}: noted.")]
        if markers and i % 100 == 0:
            backlog.append(Message(role="assistant", parts=(DataPart(name="progress", data={"step": i}),)))
    for start in range(0, len(backlog), 1_000):
        await memory.store.save_messages("t1", backlog[start : start + 1_000])


async def test_get_context_past_the_kept_window_keeps_the_stored_instructions(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'memory.db'}", **_options()) as memory:
        await _backlog(memory, system=True, markers=True)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("where is my parcel?")])
        await turn.end([Message.assistant("On its way.")])
        for _ in range(2):  # the first after the turn, and again
            context = await memory.get_context("t1")
            assert [m.text for m in context.messages if m.role == "system"][:1] == [INSTRUCTIONS]
            assert [m.text for m in context.raw_messages][-2:] == ["where is my parcel?", "On its way."]
            first = next(m.seq for m in context.raw_messages if m.role != "system")
            before = [m for m in await memory.list_messages("t1") if m.role != "system" and m.seq < first]
            assert context.trimmed == len(before) > MAX_MESSAGES, "every message left out is counted"


async def test_messages_another_process_added_are_counted_as_left_out(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    async with Memory(url, **_options()) as memory:
        await _backlog(memory, system=False, markers=False)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("where is my parcel?")])
        await turn.end([Message.assistant("On its way.")])
        await memory.get_context("t1")
        async with Memory(url, **_options()) as other:  # another process adds to the thread
            added: list[Message] = []
            for i in range(750):
                added += [Message.user(f"Imported {i}?"), Message.assistant(f"Imported answer {i}.")]
            await other.store.save_messages("t1", added)

        context = await memory.get_context("t1")
        stored = await memory.list_messages("t1")
        assert context.trimmed == len(stored) - len(context.raw_messages), "every pending message is counted in"

        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("and now?")])
        assert turn.context.raw_messages[-1].text == "and now?"
        stored = await memory.list_messages("t1")
        assert turn.context.trimmed == len(stored) - len(turn.context.raw_messages), "every pending message is counted in"
        await turn.end()
