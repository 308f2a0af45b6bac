"""helper-133: LangChain v1 subagent pattern (a create_agent called from a tool of the main agent).
The subagent's run inherits the parent's config (its LangGraph thread_id and checkpointer), so its
ObservationalMemoryMiddleware writes to the same obsmem thread; its state holds only its own task.
The removal sync (53f959b/0799849: 'what the same state held and no longer holds', checked by
checkpointer + LangGraph thread) takes the subagent's fresh state for a trim of the state the
last run of that (checkpointer, thread) ended with, and deletes messages nobody removed."""
from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_remove_130 import Recording, ask

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_subagent_run_deletes_nothing_of_the_conversation() -> None:
    async with Memory("memory://") as memory:
        sub_model = Recording(answer=lambda ms: AIMessage(f"research on {ms[-1].text}"), requests=[])
        sub = create_agent(sub_model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])

        @tool
        async def research(topic: str) -> str:
            """Ask the research subagent."""
            out = await sub.ainvoke({"messages": [HumanMessage(topic)]})
            return str(out["messages"][-1].text)

        def answer(messages: list[BaseMessage]) -> AIMessage:
            last = messages[-1]
            if isinstance(last, HumanMessage):
                return AIMessage("", tool_calls=[{"id": f"c{len(main_model.requests)}", "name": "research",
                                                  "args": {"topic": last.text}}])
            return AIMessage(f"answer: {last.text}")

        main_model = Recording(answer=answer, requests=[])
        main = create_agent(main_model, tools=[research],
                            middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
                            checkpointer=InMemorySaver())
        for q in ["pugs", "corgis", "beagles"]:
            await ask(main, "lc-sub", q)
        stored = [m.text for m in await memory.list_messages("lc-sub")]
        for q in ["pugs", "corgis", "beagles"]:
            assert q in stored, stored
        # the model's last request still holds the earlier questions
        sent = [m.text for m in main_model.requests[-1] if isinstance(m, HumanMessage | AIMessage | ToolMessage)]
        assert "pugs" in sent and "corgis" in sent, sent
