"""A model's tool call whose JSON arguments nest very deeply (helper-171).

A model (or a prompt injection steering it) can write arguments nested hundreds or thousands of
levels deep. ``from_openai`` / ``from_openai_responses`` (the converters the README's loop and the
OpenAI Agents session use) raised ``RecursionError`` for the deepest (not the documented
``InvalidInputError``), and for a few hundred levels they parsed a dict no store keeps, so saving
the model's answer (``turn.step``) was refused and the turn failed. Arguments nested that deeply
now stay text, as arguments that are not a JSON object do: stored, and sent back exactly.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, from_openai, from_openai_responses, to_openai, to_openai_responses
from obsmem.types import ToolCallPart

pytestmark = pytest.mark.anyio


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _chat(arguments: str) -> tuple[dict[str, Any], dict[str, Any]]:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}
    return call, {"role": "tool", "tool_call_id": "call_1", "content": "found"}


@pytest.mark.parametrize("depth", [300, 5000])
async def test_deep_chat_arguments_are_stored_and_sent_back_exactly(depth: int) -> None:
    arguments = _nested(depth)
    call, result = _chat(arguments)
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                       messages=from_openai([{"role": "user", "content": "look it up"}]))
        context = await turn.step(from_openai([call]))
        context = await turn.step(from_openai([result], history=context.messages))
        await turn.end()
        wire = to_openai((await memory.get_context("t1")).messages)
    calls = [m for m in wire if m.get("tool_calls")]
    assert [c["tool_calls"][0]["function"]["arguments"] for c in calls] == [arguments]


@pytest.mark.parametrize("depth", [300, 5000])
async def test_deep_responses_arguments_are_stored_and_sent_back_exactly(depth: int) -> None:
    arguments = _nested(depth)
    items = [
        {"role": "user", "content": "look it up"},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
    ]
    async with Memory("memory://") as memory:
        messages = from_openai_responses(items)
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=messages[:1])
        await turn.step(messages[1:2])
        await turn.step(messages[2:])
        await turn.end()
        wire = to_openai_responses((await memory.get_context("t1")).messages)
    assert [i["arguments"] for i in wire if i.get("type") == "function_call"] == [arguments]


def test_ordinary_arguments_still_become_an_object() -> None:
    call, _ = _chat('{"city": "Oslo", "days": [1, 2], "opts": {"units": {"temp": "C"}}}')
    [message] = from_openai([call])
    [part] = [p for p in message.parts if isinstance(p, ToolCallPart)]
    assert part.args == {"city": "Oslo", "days": [1, 2], "opts": {"units": {"temp": "C"}}}
