"""A run whose input is several user messages (a note, then the question) failed at its model
call and was run again with the same input. The retry fixes of this session (f6261e8, 59b94f2)
took only the *last* input for the stored one, so the earlier input was stored again after it:
the thread became [..., note, question, note] and the model's newest message was the note, not
the question (it was asked to answer the note). The whole input, when the thread ends with it
unanswered, is now the stored input; otherwise every message is new, in the order sent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_agent_framework_retry import Flaky as FlakyServer
from tests.integrations.test_agent_framework_retry import _questions as _af_questions
from tests.integrations.test_agent_framework_retry import server  # noqa: F401 - the fixture
from tests.integrations.test_langchain_retry import Flaky
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

NOTE, QUESTION = "Here is his vet's note: no grain.", "What does he eat?"


def _questions(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, HumanMessage)]


async def test_langchain_a_retried_input_of_two_messages_keeps_its_order() -> None:
    model = Flaky(messages=iter([AIMessage("answer 1"), AIMessage("answer 2"), AIMessage("answer 3")]), seen=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        config: Any = {"configurable": {"thread_id": "lc-two"}}
        await agent.ainvoke({"messages": [("user", "Where does Rex walk?")]}, config)
        model.down = True
        with pytest.raises(ConnectionError):
            await agent.ainvoke({"messages": [("user", NOTE), ("user", QUESTION)]}, config)
        model.down = False

        await agent.ainvoke({"messages": [("user", NOTE), ("user", QUESTION)]}, config)

        assert _questions(model.seen[-1]) == ["Where does Rex walk?", NOTE, QUESTION]
        assert [(m.role, m.text) for m in await memory.list_messages("lc-two")] == [
            ("user", "Where does Rex walk?"), ("assistant", "answer 1"),
            ("user", NOTE), ("user", QUESTION), ("assistant", "answer 2"),
        ]


async def test_langchain_only_the_last_input_matching_stores_the_whole_input_again_in_order() -> None:
    """The thread ends with the question, but the note before it is new: nothing is taken back
    (the question is stored again after the new note, so the model's newest message is it)."""
    model = Flaky(messages=iter([AIMessage("answer 1"), AIMessage("answer 2")]), seen=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        config: Any = {"configurable": {"thread_id": "lc-two-b"}}
        model.down = True
        with pytest.raises(ConnectionError):
            await agent.ainvoke({"messages": [("user", QUESTION)]}, config)
        model.down = False

        await agent.ainvoke({"messages": [("user", NOTE), ("user", QUESTION)]}, config)

        assert _questions(model.seen[-1])[-1] == QUESTION
        assert [m.text for m in await memory.list_messages("lc-two-b")][-2:] == [QUESTION, "answer 1"]


async def test_agent_framework_a_retried_input_of_two_messages_keeps_its_order(
    server: tuple[WireServer, FlakyServer],  # noqa: F811 - the fixture
) -> None:
    from agent_framework import Message as AFMessage
    from agent_framework.exceptions import ChatClientException

    from tests.integrations.test_agent_framework_retry import helper_agent

    wire, flaky = server
    async with Memory("memory://") as memory:
        agent = helper_agent(wire, memory)
        session = agent.create_session(session_id="af-two")
        await agent.run("Where does Rex walk?", session=session)
        flaky.down = True
        with pytest.raises(ChatClientException):
            await agent.run([AFMessage("user", [NOTE]), AFMessage("user", [QUESTION])], session=session)
        flaky.down = False

        await agent.run([AFMessage("user", [NOTE]), AFMessage("user", [QUESTION])], session=session)

        assert _af_questions(flaky.bodies[-1]) == ["Where does Rex walk?", NOTE, QUESTION]
        texts = [(m.role, m.text) for m in await memory.list_messages("af-two")]
        assert texts[2:] == [("user", NOTE), ("user", QUESTION), ("assistant", f"You said: {QUESTION}")], texts
