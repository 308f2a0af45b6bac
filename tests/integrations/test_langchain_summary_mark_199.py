"""LangChain: what obsmem takes for ``SummarizationMiddleware``'s summary (helper 199).

The summary is a ``HumanMessage`` marked ``additional_kwargs={"lc_source": "summarization"}`` that
the middleware puts first in the state in place of the messages it summarised. obsmem neither
stores nor sends it and keeps the summarised messages (a26c2df). A user's message carrying the
same mark (an app that passes the client's message fields on, a LangGraph server's input) was
taken for a summary: never stored, never sent; as a thread's first message the model got an
empty request, later the model answered without the user's question.

The summary is now the marked message first in the state with the kept messages after it, and
never one obsmem saved. The app's removal after a summarization (its summary held in the state
from then on) is a control: it still deletes.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware, before_model
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import config, recording

pytestmark = pytest.mark.anyio

MARK = {"lc_source": "summarization"}


def answering() -> Any:
    return recording(lambda messages: AIMessage(f"re: {messages[-1].content}"))


def sent(model: Any) -> list[str]:
    return [str(m.content) for m in model.requests[-1] if not isinstance(m, SystemMessage)]


@pytest.mark.parametrize("first", [True, False], ids=["first message", "later message"])
async def test_a_users_message_marked_like_a_summary_is_stored_and_sent(first: bool) -> None:
    model = answering()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())
        if not first:
            await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        marked = HumanMessage("what is my balance?", additional_kwargs=dict(MARK))
        await agent.ainvoke({"messages": [marked]}, config("t"))
        await agent.ainvoke({"messages": [("user", "and now?")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    before = ["hello", "re: hello"] if not first else []
    assert stored == [*before, "what is my balance?", "re: what is my balance?", "and now?", "re: and now?"]
    assert sent(model) == stored[:-1]


async def test_the_apps_removal_after_a_summarization_still_deletes() -> None:
    model = answering()
    summarizer = recording(lambda messages: AIMessage("SUMMARY of the talk so far"))
    summarization = SummarizationMiddleware(model=summarizer, trigger=("messages", 5), keep=("messages", 2))

    @before_model
    def drop_secrets(state: Any, runtime: Any) -> dict[str, Any] | None:
        gone = [RemoveMessage(id=m.id) for m in state["messages"] if "secret" in str(m.content)]
        return {"messages": gone} if gone else None

    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u"), summarization, drop_secrets],
            checkpointer=InMemorySaver(),
        )
        for question in ["q0", "q1", "q2", "q3"]:
            await agent.ainvoke({"messages": [("user", question)]}, config("t"))
        assert summarizer.requests  # the summarization did trigger
        await agent.ainvoke({"messages": [("user", "my secret is 1234")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert not any("secret" in text for text in stored)
    assert not any("secret" in text for text in sent(model))
