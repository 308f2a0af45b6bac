"""LangChain: a run's ``configurable.thread_id`` that is a UUID or an int, which LangGraph and its
checkpointers take (they use its text), was refused by ObservationalMemoryMiddleware with "needs a
thread id", though the run had one (helper 195). The obsmem thread is now its text, as the
checkpointer's is. A thread id that is empty or of another type is still refused."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.errors import InvalidInputError
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import recording

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("thread_id", [uuid.UUID("5f0c1f52-8d5a-4d0e-9a39-1f1e3c1b2a77"), 42], ids=["uuid", "int"])
async def test_a_uuid_or_int_thread_id_is_the_obsmem_thread_of_its_text(thread_id: Any) -> None:
    model = recording(lambda messages: AIMessage(f"re: {messages[-1].content}"))
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)])  # no checkpointer: obsmem's history
        for question in ("hi", "again"):
            await agent.ainvoke({"messages": [("user", question)]}, {"configurable": {"thread_id": thread_id}})
        stored = [m.text for m in await memory.list_messages(str(thread_id))]
    assert stored == ["hi", "re: hi", "again", "re: again"]
    assert [m.content for m in model.requests[-1] if isinstance(m, HumanMessage)] == ["hi", "again"]


async def test_a_uuid_thread_id_with_a_checkpointer() -> None:
    thread_id = uuid.uuid4()
    model = recording(lambda messages: AIMessage(f"re: {messages[-1].content}"))
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=InMemorySaver())
        for question in ("hi", "again"):
            await agent.ainvoke({"messages": [("user", question)]}, {"configurable": {"thread_id": thread_id}})
        stored = [m.text for m in await memory.list_messages(str(thread_id))]
    assert stored == ["hi", "re: hi", "again", "re: again"]


@pytest.mark.parametrize("thread_id", ["", True, {"id": 1}], ids=["empty", "bool", "dict"])
async def test_control_a_thread_id_that_is_no_id_is_refused(thread_id: Any) -> None:
    async with Memory("memory://") as memory:
        agent = create_agent(recording(), middleware=[ObservationalMemoryMiddleware(memory)])
        with pytest.raises(InvalidInputError, match="needs a thread id"):
            await agent.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": thread_id}})
