"""A tool result that carries an image (a screenshot, a chart a tool drew) is a tool result, not
the user moving on.

Parallel calls whose results come one message at a time (LangChain gives each its own
ToolMessage; a client sends some outputs, then the rest): when the first result's message held
a file part (the image stored beside the result, as the integrations and the gateway store
one), obsmem took it for a message that "shows something", so every call still waiting was
closed as unanswered; the real results that came next were refused as already answered (or,
through the gateway, the model got an invented "No result" for tools that ran)."""

from __future__ import annotations

import pytest

from obsmem import Memory, Message
from obsmem.types import FilePart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def calls(*ids: str) -> Message:
    return Message(role="assistant", parts=[ToolCallPart(tool_call_id=i, tool_name="tool", args={}) for i in ids])


def result(call_id: str, text: str, *, image: bool = False) -> Message:
    parts: list = [ToolResultPart(tool_call_id=call_id, tool_name="tool", result=text)]
    if image:
        parts.append(FilePart(media_type="image/png", data=PNG))
    return Message(role="tool", parts=parts)


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_results_after_an_image_result_are_stored_as_they_came(url: str, tmp_path) -> None:
    url = url if url == "memory://" else f"sqlite:///{tmp_path}/m.db"
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Check the page.")])
        await turn.step([calls("shot", "lookup", "ping")])
        await turn.step([result("shot", "screenshot taken", image=True)])
        await turn.step([result("lookup", "lookup: 42")])
        context = await turn.step([result("ping", "pong")])
        await turn.step([Message.assistant("The page shows 42.")])
        await turn.end()
        stored = {p.tool_call_id: p.result for m in await memory.list_messages("t") for p in m.tool_results}
    assert stored == {"shot": "screenshot taken", "lookup": "lookup: 42", "ping": "pong"}
    sent = {p.tool_call_id: p.result for m in context.messages for p in m.tool_results}
    assert sent == stored


async def test_a_user_image_still_closes_the_waiting_calls() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Go.")])
        await turn.step([calls("a", "b")])
        await turn.step([result("a", "done a")])
        await turn.end()
        photo = Message(role="user", parts=[FilePart(media_type="image/png", data=PNG)])
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[photo])
        results = {p.tool_call_id: p for m in turn.context.messages for p in m.tool_results}
        await turn.end()
    assert set(results) == {"a", "b"} and results["a"].result == "done a"
    assert results["b"].result != "done a"  # closed as unanswered, so the image is valid to send
