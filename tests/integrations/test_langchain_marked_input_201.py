"""LangChain: a run's input that begins with a message marked like ``SummarizationMiddleware``'s
summary (``lc_source: summarization``) and has the user's question after it (helper 201).

Such a marked message first in the state, with messages after it, was taken for the summary:
neither stored nor sent. As a thread's first input (helper 199's finding) or a run's input without
a checkpointer, the user's marked message was lost. A summary replaces messages the middleware saw;
a state it saved nothing of holds the run's input. The summary of a run that summarises its own
messages (a tool loop) is still neither stored nor sent (control).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import config, recording

pytestmark = pytest.mark.anyio


def _marked(text: str) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={"lc_source": "summarization"})


def _sent(model: Any) -> list[str]:
    return [str(m.content) for m in model.requests[-1] if not isinstance(m, SystemMessage)]


@pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointer", "no checkpointer"])
async def test_a_threads_first_input_keeps_its_marked_message(checkpointed: bool) -> None:
    model = recording(lambda messages: AIMessage(f"re: {messages[-1].content}"))
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver() if checkpointed else None)
        await agent.ainvoke({"messages": [_marked("my account is 42"), ("user", "what is my balance?")]}, config("t"))
        assert _sent(model) == ["my account is 42", "what is my balance?"]
        await agent.ainvoke({"messages": [("user", "thanks")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert stored == ["my account is 42", "what is my balance?", "re: what is my balance?", "thanks", "re: thanks"]
    assert _sent(model) == stored[:-1]


async def test_a_later_runs_input_without_a_checkpointer_keeps_its_marked_message() -> None:
    model = recording(lambda messages: AIMessage(f"re: {messages[-1].content}"))
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        await agent.ainvoke({"messages": [_marked("my account is 42"), ("user", "what is my balance?")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert stored == ["hello", "re: hello", "my account is 42", "what is my balance?", "re: what is my balance?"]
    assert _sent(model) == stored[:-1]


@tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"result {n}"


@pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointer", "no checkpointer"])
async def test_control_a_summary_made_in_the_run_is_neither_stored_nor_sent(checkpointed: bool) -> None:
    def answer(messages: list[BaseMessage]) -> AIMessage:
        steps = sum(isinstance(m, ToolMessage) for m in messages)
        if steps < 4 and not any("SUMMARY" in str(m.content) for m in messages):
            return AIMessage("", tool_calls=[{"type": "tool_call", "id": f"c{len(messages)}", "name": "lookup",
                                              "args": {"n": len(messages)}}])
        return AIMessage("done")

    model = recording(answer)
    summarizer = recording(lambda messages: AIMessage("SUMMARY of the steps"))
    summarization = SummarizationMiddleware(model=summarizer, trigger=("messages", 6), keep=("messages", 2))
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[lookup],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u"), summarization],
                             checkpointer=InMemorySaver() if checkpointed else None)
        await agent.ainvoke({"messages": [("user", "look things up")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert summarizer.requests  # the summarization did trigger
    assert not any("SUMMARY" in text for text in stored)
    assert all("SUMMARY" not in text for request in model.requests for text in map(str, (m.content for m in request)))
    assert stored[0] == "look things up"
