"""LangChain v1 middleware: what another turn of the thread saves while a run observes between its
tool step and its next model call (two runs of one thread at once; found by helper-141). The run's
next model call got the other turn's question last, and its model answered that question. Now the
request ends with the run's own newest message; the other turn's messages go to later requests."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from obsmem.models.testing import FunctionModel as ObsmemFunctionModel

pytestmark = pytest.mark.anyio
OTHER = "B: what is the capital of France?"


class Recording(GenericFakeChatModel):
    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return await super()._agenerate(messages, *args, **kwargs)


async def test_the_run_s_model_call_ends_with_its_own_messages() -> None:
    memory: Memory | None = None
    saved: list[bool] = []

    async def observe(messages: list[Message], settings: Any) -> str:
        if not saved:
            saved.append(True)
            assert memory is not None
            await memory.save_messages("t", [Message.user(OTHER)])
        return "<observations>\n* (10:00) User asked to look up a record.\n</observations>"

    @tool
    def look(q: str) -> str:
        """Look a record up."""
        return "found the record in the archive of the city library, shelf 12, box 4. " * 30

    call = AIMessage("", tool_calls=[{"name": "look", "args": {"q": "archive"}, "id": "a1"}])
    model = Recording(messages=iter([call, AIMessage("Shelf 12.")]), seen=[])
    config = MemoryConfig(observation=ObservationConfig(message_tokens=150, buffer_tokens=False),
                          reflection=ReflectionConfig(observation_tokens=4000))
    memory = Memory("memory://", config=config, observer=ObsmemFunctionModel(observe),
                    reflector=ObsmemFunctionModel(lambda m, s: "<observations>\n* x\n</observations>"))
    async with memory:
        agent = create_agent(model, tools=[look],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", "A: look up the archive record " + "with details " * 20)]},
                            {"configurable": {"thread_id": "t"}})
    assert saved
    assert model.seen[-1][-1].type == "tool", [m.type for m in model.seen[-1]]
    assert OTHER not in [m.text for m in model.seen[-1]]


async def test_the_other_turn_s_question_and_answer_wait_for_the_next_run() -> None:
    memory: Memory | None = None
    saved: list[bool] = []

    async def observe(messages: list[Message], settings: Any) -> str:
        if not saved:
            saved.append(True)
            assert memory is not None
            await memory.save_messages("t2", [Message.user(OTHER), Message.assistant("Paris.")])
        return "<observations>\n* (10:00) User asked to look up a record.\n</observations>"

    @tool
    def look(q: str) -> str:
        """Look a record up."""
        return "found the record in the archive of the city library, shelf 12, box 4. " * 30

    call = AIMessage("", tool_calls=[{"name": "look", "args": {"q": "archive"}, "id": "a1"}])
    model = Recording(messages=iter([call, AIMessage("Shelf 12."), AIMessage("Box 4.")]), seen=[])
    config = MemoryConfig(observation=ObservationConfig(message_tokens=150, buffer_tokens=False),
                          reflection=ReflectionConfig(observation_tokens=4000))
    memory = Memory("memory://", config=config, observer=ObsmemFunctionModel(observe),
                    reflector=ObsmemFunctionModel(lambda m, s: "<observations>\n* x\n</observations>"))
    async with memory:
        agent = create_agent(model, tools=[look],
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", "A: look up the archive record " + "with details " * 20)]},
                            {"configurable": {"thread_id": "t2"}})
        during = [m.text for m in model.seen[-1]]
        assert model.seen[-1][-1].type == "tool", [m.type for m in model.seen[-1]]
        await agent.ainvoke({"messages": [("user", "Which box?")]}, {"configurable": {"thread_id": "t2"}})
        stored = [m.text for m in await memory.list_messages("t2")]
    assert saved
    assert OTHER not in during and "Paris." not in during
    later = [m.text for m in model.seen[-1]]
    assert later[-1] == "Which box?"
    assert OTHER in later and "Paris." in later
    assert stored.count(OTHER) == 1 and stored[-2:] == ["Which box?", "Box 4."]
