"""``ObsmemSession.pop_item`` (the OpenAI Agents SDK's "undo") read the session's whole thread to
pop one item: on a long conversation each undo read every stored message. It now reads the
newest messages, further back only as far as the item (or the call a popped tool output
answers) lies: the rows it reads do not grow with the conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession
from tests.rows_read import RowsRead

pytestmark = pytest.mark.anyio


def _chat(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"message {i} about the trip"} if i % 2 == 0
        else {"type": "message", "role": "assistant", "content": f"answer {i} about the trip"}
        for i in range(count)
    ]


async def _session(tmp_path: Path, name: str, earlier: int) -> tuple[Memory, ObsmemSession]:
    """A session whose thread holds ``earlier`` chat messages, then a tool step and an answer."""
    memory = Memory(f"sqlite:///{tmp_path / name}.db")
    session = ObsmemSession(memory, name, "user-1")
    await session.add_items(_chat(earlier))  # type: ignore[arg-type]
    await session.add_items([{"role": "user", "content": "What is the weather in Paris?"}])
    await session.add_items([
        {"type": "function_call", "call_id": "c-paris", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c-paris", "output": "sunny"},
    ])
    await session.add_items([{"type": "message", "role": "assistant", "content": "It is sunny."}])
    await session.aclose()
    await memory.settled()  # background memory work reads messages too: done before counting
    return memory, session


async def _pops(memory: Memory, session: ObsmemSession) -> tuple[list[Any], int]:
    with RowsRead(memory.store) as read:
        popped = [await session.pop_item(), await session.pop_item()]
    return popped, read.rows


async def test_undo_reads_as_many_rows_on_a_long_thread_as_on_a_short_one(tmp_path: Path) -> None:
    short_memory, short = await _session(tmp_path, "short", 20)
    long_memory, long = await _session(tmp_path, "long", 2000)
    try:
        short_popped, short_rows = await _pops(short_memory, short)
        long_popped, long_rows = await _pops(long_memory, long)
        for popped in (short_popped, long_popped):
            assert popped[0] is not None and popped[0].get("content") == "It is sunny."
            assert popped[1] is not None and popped[1].get("type") == "function_call_output"
        assert long_rows == short_rows, (short_rows, long_rows)
        assert long_rows < 100, long_rows
        # the output's call went with it; the question and the 2,000 messages before it stayed
        items = await long.get_items()
        assert not [i for i in items if i.get("type") in ("function_call", "function_call_output")]
        assert len(await long_memory.list_messages("long")) == 2001
    finally:
        await short_memory.aclose()
        await long_memory.aclose()


async def test_an_output_whose_call_is_far_back_takes_its_call_with_it(tmp_path: Path) -> None:
    """The call lies behind many newer messages (beyond the newest few read first): still found."""
    memory = Memory(f"sqlite:///{tmp_path / 'far'}.db")
    session = ObsmemSession(memory, "far", "user-1")
    try:
        await session.add_items([{"role": "user", "content": "Look it up."}])
        await session.add_items([
            {"type": "function_call", "call_id": "c-early", "name": "lookup", "arguments": "{}"}])
        await memory.save_messages("far", [
            {"role": "system", "parts": [{"type": "text", "text": f"note {i}"}]} for i in range(300)])
        await session.add_items([{"type": "function_call_output", "call_id": "c-early", "output": "found"}])
        popped = await session.pop_item()
        assert popped is not None and popped.get("type") == "function_call_output"
        stored = await memory.list_messages("far")
        assert not [m for m in stored if m.tool_calls or m.tool_results]
        assert len(stored) == 301  # the question and the notes stayed
        assert await session.pop_item() is not None  # the newest note
    finally:
        await memory.aclose()


async def test_undo_on_an_empty_or_missing_session_pops_nothing(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'empty'}.db")
    try:
        session = ObsmemSession(memory, "empty", "user-1")
        assert await session.pop_item() is None
        await session.add_items([{"role": "user", "content": "Hi"}])
        popped = await session.pop_item()
        assert popped is not None and popped.get("role") == "user"
        assert popped.get("content") == [{"type": "input_text", "text": "Hi"}]
        assert await session.pop_item() is None
    finally:
        await memory.aclose()
