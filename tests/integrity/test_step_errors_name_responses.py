"""A refused step names the argument the caller passed (``responses``), not ``messages``: found by
the typed-error fuzz (``SyncTurn.end(responses=[a stray tool result])``); fails on main."""

from __future__ import annotations

import pytest

from obsmem import InvalidInputError, Memory, Message
from obsmem.types import ToolResultPart

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("boundary", ["step", "end"])
async def test_a_stray_tool_result_in_a_step_is_refused_naming_responses(boundary: str) -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="r", messages=[Message.user("hi")])
        stray = Message(role="tool", parts=(ToolResultPart(tool_call_id="0", tool_name="x", result="late"),))
        with pytest.raises(InvalidInputError) as caught:
            await getattr(turn, boundary)([stray])
        assert caught.value.argument == "responses"
        assert str(caught.value).startswith("responses[0] (tool")
    async with Memory("memory://") as memory:  # begin_turn's own argument is still "messages"
        with pytest.raises(InvalidInputError) as caught:
            await memory.begin_turn(thread_id="t", resource_id="r", messages=[stray])
        assert caught.value.argument == "messages"
