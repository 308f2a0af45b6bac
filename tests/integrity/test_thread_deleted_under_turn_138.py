"""A turn running in one web worker while another worker deletes its thread and a new chat starts
under the same thread id (the user deletes a conversation; the app reuses the id), on one SQLite
file.

The running turn had made a tool call before the delete. Its next step (the tool's result) was
checked against the turn's own view of the thread, in which the call still waited, and the
store's ordering guard let it through (the new chat's messages call no tool): the result was
saved into the new chat, a tool result with no call before it, which every provider refuses, so
the new conversation was broken for good; and the step's context showed the deleted question
again. Nothing of the deleted turn may land in the new chat, and the new chat stays a valid
sequence; the step fails with a typed error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.errors import ObsmemError
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def call(call_id: str) -> Message:
    part = ToolCallPart(tool_call_id=call_id, tool_name="weather", args={"city": "Oslo"})
    return Message(role="assistant", parts=[part])


def result(call_id: str) -> Message:
    part = ToolResultPart(tool_call_id=call_id, tool_name="weather", result="4C")
    return Message(role="tool", parts=[part])


async def test_a_tool_result_of_a_deleted_thread_never_lands_in_the_new_chat(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/chat.db"
    async with Memory(url) as worker1, Memory(url) as worker2:
        question = [Message.user("Weather in Oslo?")]
        turn = await worker1.begin_turn(thread_id="chat", resource_id="u", messages=question)
        await turn.step([call("c1")])

        assert await worker2.delete_thread("chat")
        new_chat = [Message.user("New chat")]
        fresh = await worker2.begin_turn(thread_id="chat", resource_id="u", messages=new_chat)
        await fresh.end([Message.assistant("Hello!")])

        with pytest.raises(ObsmemError):
            await turn.step([result("c1")])

        stored = await worker2.list_messages("chat")
        assert [(m.role, m.text) for m in stored] == [("user", "New chat"), ("assistant", "Hello!")]
        assert not any(m.tool_results for m in stored)
        later = [Message.user("Still there?")]
        again = await worker2.begin_turn(thread_id="chat", resource_id="u", messages=later)
        assert all("Oslo" not in m.text for m in again.context.messages)
        assert not any(m.tool_results or m.tool_calls for m in again.context.messages)
        await again.end()
