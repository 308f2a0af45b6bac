"""Hostile review (helper-104): what users of the framework integrations hit, found by probes.

LangChain v1 ``create_agent`` answers a malformed tool call of the model (``invalid_tool_calls``)
itself: before the next model call it adds a ``ToolMessage`` ("could not be executed") to the
request, without an id, and writes it into the state, where LangGraph gives it one. The model is
a fake chat model that records what it gets.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

pytestmark = pytest.mark.anyio


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class MalformedOnce(BaseChatModel):
    """Answers the first request with a malformed tool call (and, with ``valid``, a valid one
    beside it); every later request with a text answer."""

    valid: bool = False
    requests: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "malformed-once"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        if len(self.requests) == 1:
            bad = {"name": "lookup", "args": '{"q": "a', "id": "bad1", "error": "bad json",
                   "type": "invalid_tool_call"}
            good = [{"name": "lookup", "args": {"q": "b"}, "id": "good1"}] if self.valid else []
            answer = AIMessage("let me look", tool_calls=good, invalid_tool_calls=[bad])
        else:
            answer = AIMessage(f"answer {len(self.requests)}")
        return ChatResult(generations=[ChatGeneration(message=answer)])


def results(messages: list[BaseMessage]) -> list[str]:
    return [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]


async def test_a_malformed_tool_call_does_not_break_the_thread() -> None:
    """With a checkpointer, the run after a malformed tool call (and every run after it) raised
    InvalidInputError ('holds the result of tool call bad1 ... already answered'): the patched
    ToolMessage was saved without an id at the model call, then again under the id LangGraph gave it."""
    model = MalformedOnce(requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[lookup], middleware=[ObservationalMemoryMiddleware(memory)],
                             checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t1"}}
        answers = [
            (await agent.ainvoke({"messages": [HumanMessage(question)]}, config))["messages"][-1].content
            for question in ("look it up", "hello again", "and again")
        ]
        stored = await memory.list_messages("t1")
    assert answers == ["let me look", "answer 2", "answer 3"]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant", "user", "assistant"]
    assert [r.tool_call_id for m in stored for r in m.tool_results] == ["bad1"]
    assert results(model.requests[-1]) == ["bad1"]


async def test_a_malformed_call_beside_a_valid_one_ends_its_run() -> None:
    """In one run (no checkpointer): the valid call runs, LangChain answers the malformed one; the
    run's end raised InvalidInputError instead of saving the answer."""
    model = MalformedOnce(valid=True, requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[lookup], middleware=[ObservationalMemoryMiddleware(memory)])
        result = await agent.ainvoke({"messages": [HumanMessage("look it up")]},
                                     {"configurable": {"thread_id": "t2"}})
        stored = await memory.list_messages("t2")
    assert result["messages"][-1].content == "answer 2"
    assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert sorted(r.tool_call_id for m in stored for r in m.tool_results) == ["bad1", "good1"]
    assert sorted(results(model.requests[-1])) == ["bad1", "good1"]


# -- pydantic-ai: a run that ends with a request (an output tool's return) ---------------------

from pydantic import BaseModel  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from obsmem.integrations.pydantic_ai import ObservationalMemory  # noqa: E402


class City(BaseModel):
    city: str


async def test_structured_output_with_the_runs_messages_passed_back() -> None:
    """``output_type=City`` ends each run with the output tool's return (a request); pydantic-ai
    merges it with the next run's prompt, dropping the messages' metadata (obsmem's ids). The third
    run raised InvalidInputError ('holds the result of tool call ... already answered')."""
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(list(messages))
        last = messages[-1].parts[-1]
        n = len(requests)
        if isinstance(last, UserPromptPart) and "weather" in str(last.content):
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"}, tool_call_id=f"w{n}")])
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"city": "Oslo"}, tool_call_id=f"o{n}")])

    async with Memory("memory://") as memory:
        agent = Agent(FunctionModel(model), output_type=City,
                      capabilities=[ObservationalMemory(memory, resource_id="u")])

        @agent.tool_plain
        def weather(city: str) -> str:
            return f"{city}: snow"

        history = None
        outputs = []
        for question in ("weather in Oslo?", "and the weather tomorrow?", "thanks", "bye"):
            result = await agent.run(question, conversation_id="c1", message_history=history)
            history = result.all_messages()
            outputs.append(result.output)
        stored = await memory.list_messages("c1")
    assert outputs == [City(city="Oslo")] * 4
    assert [m.text for m in stored if m.role == "user"] == [
        "weather in Oslo?", "and the weather tomorrow?", "thanks", "bye"
    ]
    results = [r.tool_call_id for m in stored for r in m.tool_results]
    assert len(results) == len(set(results)) == 6  # every result once: w1 o2, w3 o4, o5, o6
    sent = [p for m in requests[-1] for p in m.parts]
    calls = {p.tool_call_id for p in sent if isinstance(p, ToolCallPart)}
    assert calls == {p.tool_call_id for p in sent if isinstance(p, ToolReturnPart)}


async def test_a_malformed_tool_call_survives_a_new_middleware_over_the_checkpoint() -> None:
    """A new middleware object (a restart, or one agent per request) over the same checkpoint
    knows the answered malformed call by the id it was stored under."""
    model = MalformedOnce(requests=[])
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t3"}}
    async with Memory("memory://") as memory:
        for question in ("look it up", "hello again", "after a restart"):
            agent = create_agent(model, tools=[lookup], middleware=[ObservationalMemoryMiddleware(memory)],
                                 checkpointer=saver)
            await agent.ainvoke({"messages": [HumanMessage(question)]}, config)
        stored = await memory.list_messages("t3")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant", "user", "assistant"]
    assert results(model.requests[-1]) == ["bad1"]
