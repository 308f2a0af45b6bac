"""LangChain: an agent run (no checkpointer) that failed at its model call (the provider down),
run again with the same question. The middleware had saved the failed run's question (a failed
call leaves its messages pending, as it should), and the rerun saved it again: the thread held the
question twice and the model got it twice, where the agent without obsmem sends it once. With a
checkpointer the state itself keeps both (LangGraph stored the failed run's input), and obsmem
keeps both, as the state does."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

pytestmark = pytest.mark.anyio


class Flaky(GenericFakeChatModel):
    """Fails while ``down``; records the messages of every call."""

    down: bool = False
    seen: list[list[BaseMessage]] = []

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        if self.down:
            raise ConnectionError("provider down")
        return await super()._agenerate(messages, *args, **kwargs)


def _questions(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, HumanMessage)]


async def _ask(agent: Any, thread: str, question: str) -> None:
    await agent.ainvoke({"messages": [("user", question)]}, {"configurable": {"thread_id": thread}})


async def test_a_question_asked_again_after_a_failed_run_is_stored_and_sent_once() -> None:
    model = Flaky(messages=iter([AIMessage("answer 1"), AIMessage("answer 2"), AIMessage("answer 3")]), seen=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await _ask(agent, "lc-r1", "Where does Rex walk?")
        model.down = True
        with pytest.raises(ConnectionError):
            await _ask(agent, "lc-r1", "What does he eat?")
        assert [m.text for m in await memory.list_messages("lc-r1")][-1] == "What does he eat?"  # kept

        model.down = False
        await _ask(agent, "lc-r1", "What does he eat?")
        assert _questions(model.seen[-1]) == ["Where does Rex walk?", "What does he eat?"]
        await _ask(agent, "lc-r1", "And how old is he?")

        assert _questions(model.seen[-1]) == ["Where does Rex walk?", "What does he eat?", "And how old is he?"]
        assert [(m.role, m.text) for m in await memory.list_messages("lc-r1")] == [
            ("user", "Where does Rex walk?"), ("assistant", "answer 1"),
            ("user", "What does he eat?"), ("assistant", "answer 2"),
            ("user", "And how old is he?"), ("assistant", "answer 3"),
        ]


async def test_with_a_checkpointer_both_questions_stay_as_the_state_holds_them() -> None:
    model = Flaky(messages=iter([AIMessage("answer 1"), AIMessage("answer 2")]), seen=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        await _ask(agent, "lc-r2", "Where does Rex walk?")
        model.down = True
        with pytest.raises(ConnectionError):
            await _ask(agent, "lc-r2", "What does he eat?")
        model.down = False
        await _ask(agent, "lc-r2", "What does he eat?")

        assert _questions(model.seen[-1]) == ["Where does Rex walk?", "What does he eat?", "What does he eat?"]
        assert [m.text for m in await memory.list_messages("lc-r2") if m.role == "user"] == [
            "Where does Rex walk?", "What does he eat?", "What does he eat?"]
