"""LangChain: ``SummarizationMiddleware`` beside ObservationalMemoryMiddleware (helper 195).

When the summarization triggers it removes every message of the state (``REMOVE_ALL_MESSAGES``)
and puts back its summary (a ``HumanMessage`` marked ``lc_source: summarization``) and the newest
messages. obsmem took that for the app's removal: it deleted the summarised messages from the
thread, observed or not (so memory lost what it had not observed yet), stored the summary as
something the user said, after the kept answer it summarised, and sent the model a request that
began with that answer. The summary is LangChain's digest of messages obsmem keeps itself: now
obsmem neither deletes them nor stores or sends the summary, and the model gets obsmem's context
in the conversation's order. An app's own removal (the control) still deletes."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware, before_model
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import config, recording

pytestmark = pytest.mark.anyio

QUESTIONS = [f"question {i}" for i in range(5)]


def answering() -> Any:
    return recording(lambda messages: AIMessage(f"re: {messages[-1].content}"))


@pytest.mark.parametrize("obsmem_first", [True, False], ids=["obsmem first", "summarization first"])
async def test_summarised_messages_stay_in_memory_and_the_summary_is_not_stored(obsmem_first: bool) -> None:
    model = answering()
    summarizer = recording(lambda messages: AIMessage("SUMMARY of the talk so far"))
    summarization = SummarizationMiddleware(model=summarizer, trigger=("messages", 5), keep=("messages", 2))
    async with Memory("memory://") as memory:
        obsmem = ObservationalMemoryMiddleware(memory, resource_id="u")
        agent = create_agent(
            model, middleware=[obsmem, summarization] if obsmem_first else [summarization, obsmem],
            checkpointer=InMemorySaver(),
        )
        for question in QUESTIONS:
            await agent.ainvoke({"messages": [("user", question)]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert summarizer.requests  # LangChain's summarization did trigger
    expected = [text for q in QUESTIONS for text in (q, f"re: {q}")]
    assert stored == expected  # nothing deleted, no summary stored as the user's
    last = [m for m in model.requests[-1] if not isinstance(m, SystemMessage)]
    assert "SUMMARY" not in " ".join(str(m.content) for m in last)
    assert [str(m.content) for m in last] == expected[:-1]  # in the conversation's order
    assert isinstance(last[0], HumanMessage)


async def test_control_the_apps_own_removal_still_deletes() -> None:
    @before_model
    def forget_all_but_newest(state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < 5:
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), messages[-1]]}

    model = answering()
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u"), forget_all_but_newest],
            checkpointer=InMemorySaver(),
        )
        for question in QUESTIONS[:3]:
            await agent.ainvoke({"messages": [("user", question)]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert stored == ["question 2", "re: question 2"]


async def test_a_new_middleware_over_a_summarised_checkpoint_stores_no_summary(tmp_path: Any) -> None:
    """A restart (a new Memory and middleware over the same checkpointer) after the summarization."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = answering(), InMemorySaver()
    summarizer = recording(lambda messages: AIMessage("SUMMARY of the talk so far"))

    def agent_over(memory: Memory) -> Any:
        summarization = SummarizationMiddleware(model=summarizer, trigger=("messages", 5), keep=("messages", 2))
        return create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u"), summarization],
            checkpointer=saver,
        )

    async with Memory(url) as memory:
        agent = agent_over(memory)
        for question in QUESTIONS[:4]:
            await agent.ainvoke({"messages": [("user", question)]}, config("t"))
    assert summarizer.requests
    async with Memory(url) as memory:
        await agent_over(memory).ainvoke({"messages": [("user", QUESTIONS[4])]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert stored == [text for q in QUESTIONS for text in (q, f"re: {q}")]
