"""LangChain: an agent with ObservationalMemoryMiddleware run from sync code (``invoke``, ``stream``)
is refused with obsmem's own error, which says what to do (helper 195). Before, LangChain raised a
TypeError naming the middleware's ``abefore_agent``, which ``except ObsmemError`` did not catch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.errors import InvalidInputError
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import config, recording

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("call", ["invoke", "stream"])
async def test_a_sync_run_gets_obsmems_error_and_stores_nothing(call: str) -> None:
    model = recording(lambda messages: AIMessage("ok"))
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")], checkpointer=InMemorySaver()
        )

        def run() -> Any:
            given = {"messages": [("user", "hi")]}
            return agent.invoke(given, config("t")) if call == "invoke" else list(agent.stream(given, config("t")))

        with pytest.raises(InvalidInputError, match=r"async: run the agent with ainvoke/astream"):
            await asyncio.to_thread(run)
        assert model.requests == []
        assert await memory.store.get_thread("t") is None
        # the same agent then runs from async code (the checkpointed state kept the refused input)
        result = await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        assert result["messages"][-1].content == "ok"
        assert [m.text for m in await memory.list_messages("t")] == ["hi", "hello", "ok"]
