"""pydantic-ai with obsmem: what a tool returns as JSON data stays data (helper-188).

An image a tool returns (``BinaryContent``) is stored as a file part. obsmem told one from the
message's JSON form, where a plain dict a tool returned (an API's answer that happens to hold
``"kind": "binary"`` and a ``"data"`` text) looks the same: it was stored as an attachment, its
text decoded as base64 (``"%%%%"`` to nothing; a sentence to bytes), the observer shown
``[text/plain attachment]`` instead of it, and later turns sent the model a file of those bytes
in place of what the tool said.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory, from_pydantic_ai, to_pydantic_ai
from obsmem.types import FilePart, ToolResultPart

pytestmark = pytest.mark.anyio

ANSWERS: dict[str, Any] = {
    "dict": {"kind": "binary", "data": "Call Bob at 555-0100 about the deal", "media_type": "text/plain"},
    "list": [{"kind": "binary", "data": "%%%%", "media_type": "text/plain"}, "page 2"],
}


class Recorder:
    """Calls the ``lookup`` tool for each new question, then answers; keeps every request."""

    def __init__(self) -> None:
        self.calls: list[list[pai.ModelMessage]] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        if any(isinstance(p, pai.UserPromptPart) for p in messages[-1].parts):
            call = pai.ToolCallPart("lookup", {}, tool_call_id=f"call-{len(self.calls)}")
            return pai.ModelResponse(parts=[call])
        return pai.ModelResponse(parts=[pai.TextPart("done")])


def _returns(call: list[pai.ModelMessage], tool_call_id: str) -> list[Any]:
    return [
        p.content for m in call for p in m.parts
        if isinstance(p, pai.ToolReturnPart) and p.tool_call_id == tool_call_id
    ]  # fmt: skip


@pytest.mark.parametrize("shape", sorted(ANSWERS))
async def test_a_dict_a_tool_returns_is_stored_observed_and_sent_as_it_was(shape: str) -> None:
    model = Recorder()
    async with Memory("memory://") as memory:
        capability = ObservationalMemory(memory, resource_id="u")
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[capability])

        @agent.tool_plain
        def lookup() -> Any:
            """Look the contact up."""
            return ANSWERS[shape]

        await agent.run("Who do I call?", conversation_id="t1")
        await agent.run("And after that?", conversation_id="t1")  # no message_history: from the store
        tool = [m for m in await memory.list_messages("t1") if m.role == "tool"][0]
        assert not [p for p in tool.parts if isinstance(p, FilePart)]
        result = tool.parts[0]
        assert isinstance(result, ToolResultPart) and result.result == ANSWERS[shape]
        assert _returns(model.calls[-2], "call-1") == [ANSWERS[shape]]  # the second run's first request


def test_a_dict_a_tool_returns_converts_back_exactly() -> None:
    for answer in ANSWERS.values():
        request = pai.ModelRequest(parts=[pai.ToolReturnPart("lookup", answer, tool_call_id="c1")])
        converted = from_pydantic_ai([request])
        assert not [p for m in converted for p in m.parts if isinstance(p, FilePart)]
        back = to_pydantic_ai(converted)
        assert isinstance(back[0].parts[0], pai.ToolReturnPart) and back[0].parts[0].content == answer
