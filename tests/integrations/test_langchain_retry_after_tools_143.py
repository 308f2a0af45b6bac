"""LangChain v1 (create_agent, no checkpointer): a run that failed after its tools ran, run again
with the same question (found by helper-141). The middleware stored the question, the call and its
result; the retry stored the question again and the model got [Q, call, result, Q]. Controls: the
same question after a run that ended on a tool message (a structured response, a return_direct
tool) is a new message."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

pytestmark = pytest.mark.anyio
QUESTION = "What is the weather in Oslo?"


class Flaky(GenericFakeChatModel):
    fail_after_tool: bool = True
    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        if messages[-1].type == "tool" and self.fail_after_tool:
            self.fail_after_tool = False
            raise ConnectionError("provider 500")
        return await super()._agenerate(messages, *args, **kwargs)


async def test_a_run_failed_after_its_tool_is_retried_with_the_question_stored_and_sent_once() -> None:
    ran: list[str] = []

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"{city}: snow"

    call = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "w1"}])
    model = Flaky(messages=iter([call, AIMessage("Snow in Oslo."), AIMessage("Snow in Oslo.")]), seen=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[weather],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        with pytest.raises(ConnectionError):
            await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t1"}})
        await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t1"}})
        stored = await memory.list_messages("t1")
    questions = [m.text for m in model.seen[-1] if isinstance(m, HumanMessage)]
    assert questions == [QUESTION], questions
    assert [m.text for m in stored if m.role == "user"] == [QUESTION]


async def test_two_tool_steps_then_a_failure_the_retry_sends_both_steps_once_and_no_tool_runs_again() -> None:
    ran: list[str] = []

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"{city}: snow"

    calls = [AIMessage("", tool_calls=[{"name": "weather", "args": {"city": c}, "id": f"w{c}"}])
             for c in "AB"]
    model = Flaky(messages=iter([*calls, AIMessage("Snow in both.")]), seen=[])
    model.fail_after_tool = False
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[weather],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        original = model._agenerate

        async def fail_third(messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            if len(model.seen) == 2:
                model.seen.append(list(messages))
                raise ConnectionError("provider 500")
            return await original(messages, *args, **kwargs)

        object.__setattr__(model, "_agenerate", fail_third)
        with pytest.raises(ConnectionError):
            await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t2"}})
        await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t2"}})
        stored = await memory.list_messages("t2")
    assert ran == ["A", "B"]
    assert [m.type for m in model.seen[-1]] == ["human", "ai", "tool", "ai", "tool"]
    assert [(m.role, m.text) for m in stored if m.role in ("user", "assistant") and m.text] == [
        ("user", QUESTION), ("assistant", "Snow in both.")]


async def test_the_same_question_after_a_structured_answer_is_a_new_message() -> None:
    from langchain.agents.structured_output import ToolStrategy
    from pydantic import BaseModel

    class Forecast(BaseModel):
        summary: str

    answer = AIMessage("", tool_calls=[{"name": "Forecast", "args": {"summary": "snow"}, "id": "f1"}])
    again = AIMessage("", tool_calls=[{"name": "Forecast", "args": {"summary": "rain"}, "id": "f2"}])
    model = Flaky(messages=iter([answer, again]), seen=[], fail_after_tool=False)
    async with Memory("memory://") as memory:
        agent = create_agent(model, response_format=ToolStrategy(Forecast),
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t3"}})
        config: Any = {"configurable": {"thread_id": "t3"}}
        result = await agent.ainvoke({"messages": [("user", QUESTION)]}, config)
        stored = await memory.list_messages("t3")
    assert result["structured_response"].summary == "rain"
    assert [m.text for m in model.seen[-1] if isinstance(m, HumanMessage)] == [QUESTION, QUESTION]
    assert [m.text for m in stored if m.role == "user"] == [QUESTION, QUESTION]


async def test_the_same_question_after_a_return_direct_answer_is_a_new_message() -> None:
    @tool(return_direct=True)
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: snow"

    call = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "w1"}])
    call2 = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "w2"}])
    model = Flaky(messages=iter([call, call2]), seen=[], fail_after_tool=False)
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[weather],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t4"}})
        await agent.ainvoke({"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "t4"}})
        stored = await memory.list_messages("t4")
    assert [m.text for m in model.seen[-1] if isinstance(m, HumanMessage)] == [QUESTION, QUESTION]
    assert [m.text for m in stored if m.role == "user"] == [QUESTION, QUESTION]
