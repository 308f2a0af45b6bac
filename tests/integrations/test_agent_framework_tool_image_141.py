"""Microsoft Agent Framework: an image a tool returns reaches later runs (helper-141).

A tool that returns contents (``Content.from_data(...)``: a chart, a screenshot) gives a
``function_result`` whose ``result`` is empty and whose ``items`` hold the image. obsmem stored
the empty result only: the image was lost, and later runs sent the model an empty result for
that call. Now the image is a file part of the tool message, after its result (counted and
observed as an image), and comes back as the result's items.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    tool,
)
from agent_framework import Message as AFMessage

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.integrations.agent_framework import from_agent_framework, to_agent_framework
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.tokens import default_counter
from obsmem.types import FilePart, ToolResultPart

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)
IMAGE = os.urandom(30_000)


class Charts(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """A model that asks for the chart tool on each question and answers once it has the result."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[list[AFMessage]] = []

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        sent = list(messages)
        self.calls.append(sent)

        async def one() -> ChatResponse:
            if sent[-1].role == "tool":
                return ChatResponse(messages=[AFMessage("assistant", ["There is your chart."])])
            call = Content.from_function_call(f"chart-{len(self.calls)}", "chart", arguments="{}")
            return ChatResponse(messages=[AFMessage("assistant", [call])])

        return one()


def _image_items(content: Content) -> list[Content]:
    return [i for i in content.items or () if i.type == "data"]


@pytest.mark.parametrize("caption", [False, True], ids=["image", "caption-and-image"])
async def test_an_image_a_tool_returns_reaches_later_runs(caption: bool) -> None:
    @tool
    def chart() -> Any:
        """Draw the chart."""
        image = Content.from_data(data=IMAGE, media_type="image/png")
        return [Content.from_text("Sales by month"), image] if caption else image

    client = Charts()
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[chart],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        for turn in range(3):
            await agent.run(f"Draw chart {turn}", session=session)
        stored = await memory.list_messages("c1")
    tools = [m for m in stored if m.role == "tool"]
    assert len(tools) == 3
    for message in tools:
        assert [type(p) for p in message.parts] == [ToolResultPart, FilePart]
        assert message.parts[1].media_type == "image/png"  # type: ignore[union-attr]
        assert message.tool_results[0].result == ("Sales by month" if caption else "")
        assert default_counter().count_message(message) < 5_000
    # the last run's model got every earlier result with its image
    results = [c for m in client.calls[-1] for c in m.contents if c.type == "function_result"]
    assert len(results) == 3
    for result in results:
        images = _image_items(result)
        assert len(images) == 1 and images[0].media_type == "image/png"
        assert images[0].uri == Content.from_data(data=IMAGE, media_type="image/png").uri
        texts = [i.text for i in result.items or () if i.type == "text"]
        assert texts == (["Sales by month"] if caption else [])


def test_a_function_result_with_an_image_converts_back() -> None:
    call = AFMessage("assistant", [Content.from_function_call("c1", "chart", arguments="{}")])
    image = Content.from_data(data=b"\x89PNG-bytes", media_type="image/png")
    result = AFMessage("tool", [Content.from_function_result("c1", result=[image])])
    converted = from_agent_framework([call, result])
    assert [type(p) for p in converted[1].parts] == [ToolResultPart, FilePart]
    back = to_agent_framework(converted)
    assert [m.role for m in back] == ["assistant", "tool"]
    (content,) = back[1].contents
    assert content.type == "function_result" and content.call_id == "c1"
    assert [i.to_dict() for i in content.items or ()] == [image.to_dict()]
    assert [m.parts for m in from_agent_framework(back)] == [m.parts for m in converted]
