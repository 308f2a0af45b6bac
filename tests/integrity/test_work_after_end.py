"""Memory work that falls due at ``turn.end(responses)`` runs then, not at the next turn.

Seen from the user's side: an agent calls a tool, the tool returns a large result (here a
43,000-token export, past ``message_tokens`` 2,000 and past ``block_after``), and the agent's
final answer goes to ``turn.end([answer])``. Before the fix nothing ran at ``end``: the stored
window stayed "blocked" with the whole export in it, so ``memory.get_context`` (the context
without the Turn API, and what ``POST /turns/{id}/end`` returns) handed back every raw byte, and
the *next* turn had to wait for the observation before its user saw anything. Now ``end`` starts
the work that is due (in the background when the memory has a wait bound, inline without one),
``get_context`` waits for a turn's work still running (at most ``max_turn_wait``) before it
reads, and the next turn finds the export observed.

A quiet ``end`` (nothing due) starts nothing: no observation happens before the threshold.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig
from obsmem.models.testing import FunctionModel
from obsmem.om.engine import EngineEvent
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

ROWS = [{"id": i, "name": f"item {i}", "city": "Lisbon"} for i in range(1500)]  # ~43,000 tokens


def _config(buffered: bool) -> MemoryConfig:
    return MemoryConfig(observation=ObservationConfig(message_tokens=2000, buffer_tokens=0.25 if buffered else False))


async def _export_turn(memory: Memory, thread_id: str) -> None:
    """One turn: the user asks, the agent calls a tool, the tool answers with the export, and
    the final answer goes to ``end``."""
    turn = await memory.begin_turn(thread_id=thread_id, resource_id="u", messages=[Message.user("export the table")])
    await turn.step([Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="export", args={}),))])
    await turn.step([Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="export", result={"rows": ROWS}),))])
    await turn.end([Message.assistant("Exported the 1,500 rows.")])


def _raw_chars(messages: list[Message]) -> int:
    return sum(len(json.dumps([p.model_dump(mode="json") for p in m.parts])) for m in messages)


@pytest.mark.parametrize("buffered", [False, True], ids=["synchronous", "buffered"])
async def test_get_context_right_after_the_end_holds_no_observed_export(buffered: bool) -> None:
    async with Memory("memory://", config=_config(buffered)) as memory:
        await _export_turn(memory, "t")
        context = await memory.get_context("t")  # no settled(): get_context waits for the turn's work
        assert _raw_chars(context.raw_messages) < 10_000, [m.role for m in context.raw_messages]
        assert context.has_observations
        status = await memory.status("t")
        assert status.phase != "blocked" and status.window_tokens < 2000, (status.phase, status.window_tokens)
        # nothing lost: every raw message is still stored
        assert [m.role for m in await memory.list_messages("t")] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("buffered", [False, True], ids=["synchronous", "buffered"])
async def test_the_next_turn_does_not_wait_for_the_last_turns_export(buffered: bool) -> None:
    async with Memory("memory://", config=_config(buffered)) as memory:
        await _export_turn(memory, "t")
        await memory.settled()
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("thanks, which city were they in?")])
        assert not turn.waited, [o.operation for o in turn.outcomes if o.waited]
        assert turn.context.messages[-1].text == "thanks, which city were they in?"
        assert _raw_chars(turn.context.raw_messages) < 10_000
        await turn.end()


async def test_without_a_wait_bound_the_work_runs_inside_end() -> None:
    async with Memory("memory://", config=_config(False), max_turn_wait=None) as memory:
        await _export_turn(memory, "t")
        assert memory.background.pending == 0  # nothing left running behind the end
        status = await memory.status("t")
        assert status.phase != "blocked" and status.window_tokens < 2000


async def test_end_does_not_wait_for_the_work_it_starts() -> None:
    """With a wait bound, ``end`` only starts the work: a held observer does not hold it."""
    gate = asyncio.Event()
    events: list[EngineEvent] = []

    async def held(messages: list[Message], settings: object = None) -> str:
        await gate.wait()
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User exported 1,500 rows of a table (all in Lisbon).\n</observations>"

    async with Memory(
        "memory://", config=_config(False), observer=FunctionModel(held), max_turn_wait=0.2, on_event=events.append
    ) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("export the table")])
        await turn.step([Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="export", args={}),))])
        # the step with the fresh result does not observe it (the actor has not seen it yet)
        await turn.step([Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="export", result={"rows": ROWS}),))])
        await asyncio.wait_for(turn.end([Message.assistant("Exported.")]), timeout=30)
        assert memory.background.pending >= 1  # the observation, started by end, waits on the model
        # get_context waits at most max_turn_wait, then reads what is stored: nothing lost
        context = await asyncio.wait_for(memory.get_context("t"), timeout=30)
        assert [m.role for m in context.raw_messages][-2:] == ["tool", "assistant"]
        gate.set()
        await memory.settled()
        assert _raw_chars((await memory.get_context("t")).raw_messages) < 10_000
        assert any(e.kind == "observation-end" for e in events)


@pytest.mark.parametrize("buffered", [False, True], ids=["synchronous", "buffered"])
async def test_a_quiet_end_observes_nothing(buffered: bool) -> None:
    events: list[EngineEvent] = []
    async with Memory("memory://", config=_config(buffered), on_event=events.append) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello")])
        await turn.end([Message.assistant("Hello! How can I help?")])
        await memory.settled()
        assert [e.kind for e in events if e.kind.startswith(("observation", "buffer", "activation"))] == []
        assert [m.role for m in (await memory.get_context("t")).raw_messages] == ["user", "assistant"]


async def test_get_context_past_its_wait_cuts_the_raw_window_as_a_turn_would() -> None:
    """When the turn's work is still running after ``max_turn_wait``, ``get_context`` returns
    what is stored with the raw window cut to the engine's limit, as a turn's context is (the
    newest user message and what follows it always stay). Before, it returned every raw byte."""
    gate = asyncio.Event()

    async def held(messages: list[Message], settings: object = None) -> str:
        await gate.wait()
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User exported 1,500 rows.\n</observations>"

    async with Memory("memory://", config=_config(False), observer=FunctionModel(held), max_turn_wait=0.2) as memory:
        await _export_turn(memory, "t")
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("thanks, which city were they in?")])
        assert turn.trimmed  # the turn went on without its work: its window was cut
        await turn.end([Message.assistant("Lisbon.")])
        context = await asyncio.wait_for(memory.get_context("t"), timeout=30)
        assert context.trimmed and _raw_chars(context.raw_messages) < 10_000, context.trimmed
        assert [m.text for m in context.raw_messages][-2:] == ["thanks, which city were they in?", "Lisbon."]
        gate.set()
        await memory.settled()
        assert len(await memory.list_messages("t")) == 6  # nothing lost
