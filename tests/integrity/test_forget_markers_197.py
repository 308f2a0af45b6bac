"""obsmem's own markers (``om-*`` data parts on the replies: each observation cycle's log, and the
committed observations the knowledge agents capture from) are forgotten by the text they quote
(observations, a current task, an error), not by their bookkeeping: a marker's ids, timestamps,
counts and the settings it ran under are no one's words. Forgetting "thread" (the scope every
marker records) dropped every marker of the thread, counted as forgotten parts."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.models.testing import FunctionModel
from obsmem.types import DataPart

pytestmark = pytest.mark.anyio


def _observe(messages: list[Message], settings: Any) -> str:
    return "<observations>\n* 🔴 (10:00) The user asked about invoices.\n</observations>"


async def _observed(memory: Memory) -> None:
    for i in range(4):
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(f"question {i} about the invoices " * 8)])
        await turn.end([Message.assistant(f"answer {i} about the invoices " * 8)])
    await memory.observe("t")


def _markers(messages: list[Message]) -> list[DataPart]:
    return [p for m in messages for p in m.parts if isinstance(p, DataPart) and p.name.startswith("om-")]


def _memory() -> Memory:
    config = MemoryConfig(observation=ObservationConfig(message_tokens=200, buffer_tokens=False))
    return Memory("memory://", observer=FunctionModel(_observe, name="test:observer"), config=config)


@pytest.mark.parametrize("value", ["thread", "observation", "40000", "scope", "cycle_id"])
async def test_a_marker_s_bookkeeping_is_not_what_anyone_said(value: str) -> None:
    async with _memory() as memory:
        await _observed(memory)
        before = _markers(await memory.list_messages("t"))
        assert any(p.name == "om-observation-end" for p in before)
        counts = await memory.forget(value, thread_id="t")
        assert counts["messages"] == 0 and counts["parts"] == 0, counts
        assert _markers(await memory.list_messages("t")) == before


async def test_a_marker_quoting_the_value_still_goes() -> None:
    async with _memory() as memory:
        await _observed(memory)
        await memory.forget("invoices", thread_id="t")
        kept = await memory.list_messages("t")
        assert not any("invoices" in p.model_dump_json() for p in _markers(kept))
        assert not any("invoices" in (m.text or "") for m in kept)
