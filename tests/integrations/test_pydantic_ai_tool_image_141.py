"""pydantic-ai: an image a tool returns is an attachment, not 270,000 tokens of text (helper-141).

A tool may return ``BinaryContent`` (a chart, a screenshot), alone or in a list. obsmem kept it
in the tool result as its base64 text: a 300 KB image counted as about 270,000 tokens (the same
image in a user prompt counts as an image) and the observer was sent the base64: three runs with
such a tool made 9 observer calls (~97,000 characters of base64) where runs with the image in the
prompt made none. Now the image is a file part of the tool message (the result names it), counted
and observed as an image, and the model gets the tool return back exactly, in later runs too.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory, from_pydantic_ai, to_pydantic_ai
from obsmem.models.testing import FunctionModel as ObsmemFunctionModel
from obsmem.tokens import default_counter
from obsmem.types import FilePart, ToolResultPart

pytestmark = pytest.mark.anyio

IMAGE = os.urandom(300_000)


def _chart(kind: str) -> Any:
    image = pai.BinaryContent(data=IMAGE, media_type="image/png")
    if kind == "image":
        return image
    return ["Here is the chart:", image, pai.ImageUrl(url="https://example.com/legend.png")]


class Charts:
    """A model that asks for the chart tool on each prompt and answers once it has the result."""

    def __init__(self) -> None:
        self.calls: list[list[pai.ModelMessage]] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        if isinstance(messages[-1].parts[-1], pai.ToolReturnPart):
            return pai.ModelResponse(parts=[pai.TextPart("There is your chart.")])
        return pai.ModelResponse(parts=[pai.ToolCallPart("chart", {}, tool_call_id=f"chart-{len(self.calls)}")])


def _returns(call: list[pai.ModelMessage]) -> list[pai.ToolReturnPart]:
    return [p for m in call for p in m.parts if isinstance(p, pai.ToolReturnPart)]


@pytest.mark.parametrize("kind", ["image", "list"])
async def test_an_image_a_tool_returns_is_counted_and_observed_as_an_image(kind: str) -> None:
    observer = ObsmemFunctionModel(
        lambda messages, settings: "<observations>\n* (10:00) User asked for a chart.\n</observations>")
    reflector = ObsmemFunctionModel(lambda messages, settings: "<observations>\n* x\n</observations>")
    model = Charts()
    async with Memory("memory://", observer=observer, reflector=reflector) as memory:
        agent = Agent(FunctionModel(model), capabilities=[ObservationalMemory(memory, resource_id="u")])

        @agent.tool_plain
        def chart() -> Any:
            return _chart(kind)

        for turn in range(3):
            await agent.run(f"Draw chart {turn}, please.", conversation_id="c1")
        stored = await memory.list_messages("c1")
    # three short runs: nothing to observe (the base64 text made 9 observer calls)
    assert observer.calls == 0
    tools = [m for m in stored if m.role == "tool"]
    assert len(tools) == 3
    for message in tools:
        files = [p for p in message.parts if isinstance(p, FilePart)]
        assert len(files) == 1 and files[0].media_type == "image/png"
        result = next(p for p in message.parts if isinstance(p, ToolResultPart))
        assert "[image/png attachment]" in str(result.result) and len(str(result.result)) < 500
        assert default_counter().count_message(message) < 5_000
    # the model got the earlier runs' tool returns back as they were: the image's bytes
    earlier = _returns(model.calls[-1])
    assert len(earlier) == 3
    for part in earlier:
        content = part.content if kind == "image" else part.content[1]
        assert isinstance(content, pai.BinaryContent) and content.data == IMAGE
        if kind == "list":
            assert part.content[0] == "Here is the chart:"
            assert isinstance(part.content[2], pai.ImageUrl) and part.content[2].url == "https://example.com/legend.png"


@pytest.mark.parametrize("kind", ["image", "list"])
def test_a_tool_return_with_an_image_converts_back_exactly(kind: str) -> None:
    message = pai.ModelRequest(parts=[
        pai.ToolReturnPart("chart", _chart(kind), tool_call_id="c1"), pai.UserPromptPart("thanks"),
    ])
    converted = from_pydantic_ai([message])
    assert [m.role for m in converted] == ["tool", "user"]
    assert [type(p).__name__ for p in converted[0].parts] == ["ToolResultPart", "FilePart"]
    back = to_pydantic_ai(converted)
    dumped = pai.ModelMessagesTypeAdapter.dump_python(back, mode="json")
    original = pai.ModelMessagesTypeAdapter.dump_python([message], mode="json")
    dumped[0].pop("metadata")
    original[0].pop("metadata")
    assert dumped == original
