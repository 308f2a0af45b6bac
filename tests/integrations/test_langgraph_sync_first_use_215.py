"""LangGraph store (helper 215): a synchronous tool or node that is the first to use the store
of an async run (LangGraph runs it in a thread)."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge
from tests.integrations.test_langchain_review import recording

pytestmark = pytest.mark.anyio

ALICE_T1 = "org:acme/resource:alice/thread:t1"


@tool
def remember(key: str, fact: str, runtime: ToolRuntime) -> str:
    """Remember a fact (a plain synchronous tool, as most tools are written)."""
    assert runtime.store is not None
    runtime.store.put(("memories",), key, {"text": fact})
    return "remembered"


def two_parallel_calls(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("done")
    return AIMessage("", tool_calls=[
        {"name": "remember", "args": {"key": "city", "fact": "Alice lives in Lyon"}, "id": "c1"},
        {"name": "remember", "args": {"key": "food", "fact": "Alice is allergic to peanuts"}, "id": "c2"},
    ])


async def test_a_synchronous_tool_is_the_first_to_use_the_store_of_an_async_agent() -> None:
    """Before: the store knew its event loop only from an earlier async call, so a sync tool (run
    by LangGraph in a thread) that used it first was refused ('KnowledgeBaseStore is async')."""
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        agent = create_agent(recording(two_parallel_calls), tools=[remember], store=store)
        result = await agent.ainvoke({"messages": [("user", "remember where I live and what I can't eat")]})
        assert [m.text for m in result["messages"] if isinstance(m, ToolMessage)] == ["remembered"] * 2
        items = {item.key: item.value["text"] for item in await store.asearch(("memories",))}
        assert items == {"city": "Alice lives in Lyon", "food": "Alice is allergic to peanuts"}


class State(TypedDict):
    text: str
    found: list[str]


async def test_a_synchronous_node_is_the_first_to_use_the_store() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)

        def node(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
            assert runtime.store is not None
            runtime.store.put(("sync",), "k", {"text": state["text"]})
            item = runtime.store.get(("sync",), "k")
            return {"found": [item.value["text"]] if item else []}

        graph = StateGraph(State).add_node("n", node).add_edge(START, "n").compile(store=store)
        result = await graph.ainvoke({"text": "first use, from a thread", "found": []})
        assert result["found"] == ["first use, from a thread"]
