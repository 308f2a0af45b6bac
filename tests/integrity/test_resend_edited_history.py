"""An application that re-sends its whole history (an old tool result shortened, an old call
edited, same ids) with a new question is accepted: messages already stored are known by the
whole unobserved window, not only its newest end, and a result for an answered call is refused
as "already answered" (found by review of the lighter-turn change; the input check had been cut
to the window's newest end)."""
from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=30_000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=40_000),
)


async def history(memory: Memory) -> tuple[Message, Message, Message, Message]:
    u1 = Message.user("look up the weather")
    call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="w", args={"q": "paris"}),))
    res = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="w", result="sunny " * 50),))
    done = Message.assistant("It is sunny.")
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[u1])
    await turn.step([call])
    await turn.step([res])
    await turn.step([done])
    await turn.end()
    return u1, call, res, done


async def test_resend_history_with_truncated_old_tool_result(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", config=QUIET)
    u1, call, res, done = await history(memory)
    # The app re-sends the whole conversation, with the old tool output shortened (same id).
    short = res.model_copy(update={"parts": (ToolResultPart(tool_call_id="c1", tool_name="w", result="sunny"),)})
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[u1, call, short, done, Message.user("and tomorrow?")])
    assert turn.context.messages[-1].text == "and tomorrow?"
    await memory.aclose()


async def test_resend_history_with_edited_old_call(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", config=QUIET)
    u1, call, res, done = await history(memory)
    edited = call.model_copy(update={"parts": (ToolCallPart(tool_call_id="c1", tool_name="w", args={"q": "Paris"}),)})
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[u1, edited, res, done, Message.user("and tomorrow?")])
    assert turn.context.messages[-1].text == "and tomorrow?"
    await memory.aclose()


async def test_refusal_wording_for_an_answered_call(tmp_path: Path) -> None:
    from obsmem.errors import InvalidInputError
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", config=QUIET)
    await history(memory)
    again = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="w", result="rainy"),))
    with pytest.raises(InvalidInputError, match="already answered"):
        await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[again])
    await memory.aclose()
