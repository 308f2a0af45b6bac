"""LangChain with a checkpointer: a thread deleted with ``memory.delete_thread`` does not come
back from the agent's checkpointed state after a restart (helper-182, found by helper-179).

A new process is a new ``ObservationalMemoryMiddleware`` (and ``Memory``) over the same
checkpointer (SqliteSaver, PostgresSaver; ``InMemorySaver`` kept across stands in for one). It
stored the whole deleted conversation again from the state and sent it to the model; the
middleware that saved it did not (it remembers what it saved). A new conversation in the thread
after the delete is stored and shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.agent_model import AgentModel, request_text, small_memory_config
from tests.integrations.test_langchain_review import config, recording
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

SECRET = "tulip-7731"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny. Your door code is {SECRET}."


def agent_for(wire: WireServer, memory: Memory, saver: InMemorySaver) -> Any:
    llm = ChatOpenAI(
        model="agent-test-model", base_url=f"{wire.url}/v1", api_key="test-key", max_retries=0,  # type: ignore[arg-type]
    )
    return create_agent(llm, tools=[get_weather], system_prompt="You are a travel assistant.",
                        middleware=[ObservationalMemoryMiddleware(memory, resource_id="u1")],
                        checkpointer=saver)


async def test_a_deleted_thread_is_not_stored_or_sent_again_after_a_restart(
    server: tuple[WireServer, AgentModel], tmp_path: Path,
) -> None:
    wire, model = server
    url = f"sqlite:///{tmp_path / 'm.db'}"
    saver = InMemorySaver()
    settings = small_memory_config(message_tokens=100_000)
    async with Memory(url, config=settings) as memory:
        agent = agent_for(wire, memory, saver)
        for question in (f"Hello, my PIN is {SECRET}.", "What is the weather in Paris?"):
            await agent.ainvoke({"messages": [HumanMessage(question)]}, config("t1"))
        assert SECRET in request_text(wire.requests[-1].body)  # control: the tool result said it
        assert await memory.delete_thread("t1")

    sent: list[str] = []
    answers: list[str] = []
    for question in ("Thanks!", "Anything else?"):  # a new process each time, over the same checkpoint
        async with Memory(url, config=settings) as memory:
            before = len(wire.requests)
            agent = agent_for(wire, memory, saver)
            result = await agent.ainvoke({"messages": [HumanMessage(question)]}, config("t1"))
            answers.append(result["messages"][-1].content)
            sent += [request_text(r.body) for r in wire.requests[before:]]
            stored = await memory.list_messages("t1")

    assert answers == ["You said: Thanks!", "You said: Anything else?"]
    # before: the deleted PIN, the call and its result were stored again and sent to the model
    assert [m.text for m in stored] == [
        "Thanks!", "You said: Thanks!", "Anything else?", "You said: Anything else?"]
    assert not any(SECRET in json.dumps(m.model_dump(mode="json")) for m in stored)
    assert sent and all(SECRET not in text for text in sent)
    assert "Thanks!" in sent[-1] and "Anything else?" in sent[-1]  # the new conversation is shown
    assert model.invalid == []


async def test_a_deleted_thread_stays_gone_for_a_new_middleware_over_one_memory() -> None:
    """helper-179's reproduction: one Memory, a new middleware for the second run."""
    model = recording(lambda ms: AIMessage(f"re: {ms[-1].content}"))
    saver = InMemorySaver()
    async with Memory("memory://") as memory:
        def agent() -> Any:
            return create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver)

        await agent().ainvoke({"messages": [("user", f"my secret is {SECRET}")]}, config("t"))
        assert await memory.delete_thread("t")
        await agent().ainvoke({"messages": [("user", "third")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert stored == ["third", "re: third"]
    assert all(SECRET not in str(m.content) for m in model.requests[-1])
    assert any(m.content == "third" for m in model.requests[-1])


async def test_history_checkpointed_before_obsmem_was_added_is_still_stored() -> None:
    """Control: an agent given the middleware over a checkpoint written without it (nothing
    obsmem saved, nothing deleted) stores that history, as before."""
    model = recording(lambda ms: AIMessage(f"re: {ms[-1].content}"))
    saver = InMemorySaver()
    async with Memory("memory://") as memory:
        plain = create_agent(model, checkpointer=saver)  # no obsmem yet
        await plain.ainvoke({"messages": [("user", "earlier")]}, config("t"))
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver)
        await agent.ainvoke({"messages": [("user", "now")]}, config("t"))
        stored = [m.text for m in await memory.list_messages("t")]
    assert stored == ["earlier", "re: earlier", "now", "re: now"]
