"""LangChain: a ToolMessage whose content holds an image block (a chart, a screenshot a tool
returns; found by helper-141). from_langchain kept the blocks as the tool result's JSON (a 300 KB
image counted as 273,029 tokens, the observer read the base64) and to_langchain gave the content
back as one JSON string: later turns sent the model the image as text. Now each attachment block
is a file part of the tool message, and comes back as its block, in its place."""

from __future__ import annotations

import base64
import os

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

from obsmem.integrations.langchain import from_langchain, to_langchain
from obsmem.tokens import default_counter

IMAGE = base64.b64encode(os.urandom(300_000)).decode()


def test_an_image_block_in_a_tool_message_comes_back_as_an_image_block() -> None:
    blocks = [{"type": "text", "text": "chart"}, {"type": "image", "base64": IMAGE, "mime_type": "image/png"}]
    messages = [AIMessage("", tool_calls=[{"name": "chart", "args": {}, "id": "c1"}]),
                ToolMessage(content=blocks, tool_call_id="c1")]
    converted = from_langchain(messages)
    assert default_counter().count_message(converted[1]) < 5_000  # 273,029 now
    back = to_langchain(converted)
    assert isinstance(back[1].content, list)  # a JSON string now
    assert [b["type"] for b in back[1].content] == ["text", "image"]  # type: ignore[index]


def test_the_blocks_come_back_as_they_were_in_their_places_status_and_name_kept() -> None:
    blocks: list[Any] = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}", "detail": "low"}},
        "between",
        {"type": "image", "base64": IMAGE, "mime_type": "image/png"},
        {"type": "file", "url": "https://example.com/a.pdf", "mime_type": "application/pdf"},
    ]
    messages = [AIMessage("", tool_calls=[{"name": "chart", "args": {}, "id": "c1"}]),
                ToolMessage(content=blocks, tool_call_id="c1", status="error", id="t1")]
    converted = from_langchain(messages)
    tool_message = converted[1]
    assert [p.type for p in tool_message.parts] == ["tool-result", "file", "file", "file"]
    assert IMAGE not in str(tool_message.tool_results[0].result)
    assert default_counter().count_message(tool_message) < 5_000
    back = to_langchain(converted)
    assert len(back) == 2
    assert isinstance(back[1], ToolMessage)
    assert back[1].content == blocks
    assert (back[1].status, back[1].name, back[1].tool_call_id, back[1].id) == ("error", "chart", "c1", "t1")
    again = from_langchain(back)
    assert again[1].parts == tool_message.parts


def test_a_tool_message_without_attachments_is_unchanged() -> None:
    blocks: list[Any] = [{"type": "text", "text": "chart"}, {"type": "non_standard", "value": {"k": 1}}]
    messages = [AIMessage("", tool_calls=[{"name": "chart", "args": {}, "id": "c1"}]),
                ToolMessage(content=blocks, tool_call_id="c1")]
    converted = from_langchain(messages)
    assert [p.type for p in converted[1].parts] == ["tool-result"]
    assert converted[1].tool_results[0].result == blocks
    assert to_langchain(converted)[1].additional_kwargs["obsmem_result"] == blocks


class Recording(GenericFakeChatModel):
    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return await super()._agenerate(messages, *args, **kwargs)


@pytest.mark.anyio
async def test_a_later_run_gets_the_tool_s_image_as_an_image_block_of_the_tool_message() -> None:
    @tool
    def chart() -> list[dict[str, Any]]:
        """Draw the chart."""
        return [{"type": "text", "text": "chart"},
                {"type": "image", "base64": IMAGE, "mime_type": "image/png"}]

    call = AIMessage("", tool_calls=[{"name": "chart", "args": {}, "id": "c1"}])
    model = Recording(messages=iter([call, AIMessage("A rising line."), AIMessage("Up.")]), seen=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[chart],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", "Chart it")]}, {"configurable": {"thread_id": "t"}})
        await agent.ainvoke({"messages": [("user", "Which way?")]}, {"configurable": {"thread_id": "t"}})
        stored = await memory.list_messages("t")
    assert [m.type for m in model.seen[-1]] == ["human", "ai", "tool", "ai", "human"]
    sent = model.seen[-1][2]
    assert isinstance(sent.content, list)
    assert [b["type"] for b in sent.content] == ["text", "image"]  # type: ignore[index]
    assert sent.content[1]["base64"] == IMAGE  # type: ignore[index]
    tool_message = next(m for m in stored if m.role == "tool")
    assert [p.type for p in tool_message.parts] == ["tool-result", "file"]
