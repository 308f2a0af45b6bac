"""pydantic-ai ``run_stream`` whose final response's tool returned a ``ToolReturn`` with
``content`` (what the model is shown beside the tool's value: a screenshot, a note) (helper 199).

pydantic-ai puts that content in a user part after the returns, in the request it adds only to the
``StreamedRunResult``'s own history. fd12804 stored the returns of that request, rebuilt, but not
the content: memory lacked what pydantic-ai's history holds (a run without ``message_history``
never showed the model the content again), and the app's copy passed back stored it later, after
the next prompt; once pydantic-ai merged that copy with the next run's prompt into one request,
the content and that prompt were stored a second time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ToolReturn
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory
from obsmem.types import TextPart, ToolResultPart

pytestmark = pytest.mark.anyio


class Booking(BaseModel):
    status: str


class Model:
    def __init__(self) -> None:
        self.sent: list[list[pai.ModelMessage]] = []

    def _parts(self, messages: list[pai.ModelMessage], info: AgentInfo) -> list[pai.ToolCallPart]:
        n = len(messages)
        return [pai.ToolCallPart("book", {}, tool_call_id=f"book-{n}"),
                pai.ToolCallPart(info.output_tools[0].name, {"status": "ok"}, tool_call_id=f"out-{n}")]

    async def stream(self, messages: list[pai.ModelMessage], info: AgentInfo) -> AsyncIterator[dict[int, DeltaToolCall]]:
        self.sent.append(list(messages))
        yield {i: DeltaToolCall(name=p.tool_name, json_args=p.args_as_json_str(), tool_call_id=p.tool_call_id)
               for i, p in enumerate(self._parts(messages, info))}

    def answer(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        raise AssertionError("streamed only")


def _agent(memory: Memory, model: Model) -> Agent[None, Booking]:
    agent = Agent(FunctionModel(model.answer, stream_function=model.stream), output_type=Booking,
                  end_strategy="exhaustive", capabilities=[ObservationalMemory(memory, resource_id="u")])

    @agent.tool_plain
    def book() -> ToolReturn:
        return ToolReturn(return_value="booked", content="the seat map shows 12A")

    return agent


def _said(messages: list[pai.ModelMessage]) -> list[str]:
    """What each request and response holds, in order: prompts' text, returns' call ids."""
    out: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, pai.UserPromptPart):
                out.append(str(part.content))
            elif isinstance(part, pai.ToolReturnPart | pai.ToolCallPart):
                out.append(f"{part.part_kind}:{part.tool_call_id}")
    return out


async def _stored(memory: Memory) -> list[str]:
    out: list[str] = []
    for message in await memory.list_messages("t"):
        for part in message.parts:
            if isinstance(part, TextPart):
                out.append(part.text)
            elif isinstance(part, ToolResultPart):
                out.append(f"tool-return:{part.tool_call_id}")
            else:
                out.append(f"tool-call:{part.tool_call_id}")  # type: ignore[union-attr]
    return out


@pytest.mark.parametrize("history_back", [True, False], ids=["message_history", "no history"])
async def test_a_streamed_final_tools_content_is_stored_once_where_pydantic_ai_keeps_it(history_back: bool) -> None:
    model = Model()
    async with Memory("memory://") as memory:
        agent = _agent(memory, model)
        history: Any = None
        for prompt in ["book a seat", "another one", "and a third"]:
            async with agent.run_stream(prompt, conversation_id="t",
                                        message_history=history if history_back else None) as run:
                await run.get_output()
            history = run.all_messages()
            if history_back:
                assert await _stored(memory) == _said(history)
        stored = await _stored(memory)
    assert stored.count("the seat map shows 12A") == 3, stored
    for prompt in ["book a seat", "another one", "and a third"]:
        assert stored.count(prompt) == 1, stored
    if history_back:
        assert stored == _said(history)
    first = stored.index("tool-return:out-1")
    assert stored[first + 1:first + 3] == ["the seat map shows 12A", "another one"]
    # the second run's model got the content after the first run's returns
    assert _said(model.sent[1])[:6] == [
        "book a seat", "tool-call:book-1", "tool-call:out-1",
        "tool-return:book-1", "tool-return:out-1", "the seat map shows 12A",
    ]


async def test_a_forgotten_content_is_not_brought_back_by_the_apps_copy() -> None:
    model = Model()
    async with Memory("memory://") as memory:
        agent = _agent(memory, model)
        async with agent.run_stream("book a seat", conversation_id="t") as run:
            await run.get_output()
        await memory.forget("12A", thread_id="t")
        for prompt in ["another one", "and a third"]:
            async with agent.run_stream(prompt, conversation_id="t", message_history=run.all_messages()) as run:
                await run.get_output()
        stored = await _stored(memory)
    assert stored.count("the seat map shows 12A") == 2, stored  # the two later runs' own
    assert stored.index("the seat map shows 12A") > stored.index("another one")
