"""LangChain with a checkpointer: a value ``memory.forget`` removed is not sent again from the
agent's state (helper-175).

The middleware sends an unobserved message as the state holds it (the original, with its
provider fields) rather than as obsmem stores it. After ``forget`` the stored message no longer
holds the value (a tool result is ``"[forgotten]"``, a text part holding it is gone) but the
checkpointed state still does, and every later request of the thread sent it to the model again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.agent_model import AgentModel, request_text, small_memory_config
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

SECRET = "4242-9191"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny. Your door code is {SECRET}."


async def test_a_forgotten_value_is_not_sent_again_from_the_checkpointed_state(
    server: tuple[WireServer, AgentModel],
) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config(message_tokens=100_000)) as memory:
        llm = ChatOpenAI(model="agent-test-model", base_url=f"{wire.url}/v1", api_key="test-key", max_retries=0)  # type: ignore[arg-type]
        agent = create_agent(llm, tools=[get_weather], system_prompt="You are a travel assistant.",
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u1")],
                             checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t1"}}
        said = HumanMessage(content=[{"type": "text", "text": "Hello, I am Dana."},
                                     {"type": "text", "text": f"My PIN is {SECRET}."}])
        for question in (said, HumanMessage("What is the weather in Paris?")):
            await agent.ainvoke({"messages": [question]}, config)
        assert SECRET in request_text(wire.requests[-1].body)  # positive control: the tool result said it

        await memory.forget(SECRET, thread_id="t1")
        before = len(wire.requests)
        for question in ("Thanks!", "Anything else?"):
            result = await agent.ainvoke({"messages": [HumanMessage(question)]}, config)
            assert result["messages"][-1].content == f"You said: {question}"
        stored = await memory.list_messages("t1")

    sent = [request_text(r.body) for r in wire.requests[before:]]
    # before: the state's tool result and user message went to the model with the value
    assert sent and all(SECRET not in text for text in sent)
    assert all("Hello, I am Dana." in text and "[forgotten]" in text for text in sent)  # the rest stays
    assert model.invalid == []
    assert not any(SECRET in json.dumps(m.model_dump(mode="json")) for m in stored)
