"""Two runs of one checkpointed thread at once (a double-submitted request), the second reaching
its first model call after the first run ended. Both began from one checkpoint, so the second
run's state lacks the first run's question and answer; the middleware compared it with what the
thread's last run ended with (the first run, by then) and deleted them as removed by the app: the
first question and its answer were gone from memory. Under load the test beside it,
test_langchain_remove_130's two-runs test, met this order by chance (3 of 6 parallel runs failed,
on 48a909e too). A run now compares with what the last run had ended with when it began."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import before_agent, before_model
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_remove_130 import Recording, ask, assert_both_saved_once

pytestmark = pytest.mark.anyio


async def test_the_second_run_reaching_its_model_after_the_first_ended_deletes_nothing() -> None:
    began, first_done = asyncio.Event(), asyncio.Event()

    @before_agent
    async def note_second(state: Any, runtime: Any) -> None:
        if state["messages"][-1].text == "corgi":
            began.set()

    @before_model
    async def in_order(state: Any, runtime: Any) -> None:
        if state["messages"][-1].text == "pug":
            await began.wait()
        if state["messages"][-1].text == "corgi":
            await first_done.wait()

    def answer(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(f"answer to {messages[-1].text}")

    async def first() -> None:
        await ask(agent, "lc-race", "pug")
        first_done.set()

    model = Recording(answer=answer, requests=[])
    async with Memory("memory://") as memory:
        middleware = [in_order, ObservationalMemoryMiddleware(memory, resource_id="u"), note_second]
        agent = create_agent(model, middleware=middleware, checkpointer=InMemorySaver())
        await ask(agent, "lc-race", "hello")
        await asyncio.gather(first(), ask(agent, "lc-race", "corgi"))
        assert_both_saved_once(
            [m.text for m in await memory.list_messages("lc-race")], before=["hello", "answer to hello"]
        )
