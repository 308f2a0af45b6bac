"""Who said it: a participant's name on a message survives obsmem (helper-171).

In a group chat (a Slack or Discord bot) each user message carries its speaker's name: OpenAI's
``name`` field, LangChain's ``HumanMessage(name=...)``. obsmem dropped it on the way in, so a
later turn's request held the earlier messages without their names (the model could no longer
tell Alice from Bob) and the observer, which reads a speaker's name from ``metadata["name"]``,
never got it. Now the converters keep it there and send it back.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig, from_openai, to_openai
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)


class Recording(BaseChatModel):
    """A chat model that answers "noted" and keeps the messages of every call."""

    calls: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("noted"))])


async def test_a_group_chat_keeps_who_said_what_in_later_turns() -> None:
    model = Recording(calls=[])
    async with Memory("memory://", config=QUIET) as memory:
        agent = create_agent(model, system_prompt="You help a team.",
                             middleware=[ObservationalMemoryMiddleware(memory, resource_id="team")])
        config = {"configurable": {"thread_id": "standup"}}
        await agent.ainvoke({"messages": [HumanMessage("I'm vegetarian.", name="alice")]}, config)
        await agent.ainvoke({"messages": [HumanMessage("What can't she eat?", name="bob")]}, config)
        stored = await memory.list_messages("standup")
    sent = {m.text: m.name for m in model.calls[-1] if isinstance(m, HumanMessage)}
    assert sent == {"I'm vegetarian.": "alice", "What can't she eat?": "bob"}
    assert [m.metadata.get("name") for m in stored if m.role == "user"] == ["alice", "bob"]


async def test_chat_completions_names_are_stored_and_sent_back() -> None:
    wire = [
        {"role": "user", "name": "alice", "content": "I'm vegetarian."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "name": "bob", "content": "What can't she eat?"},
    ]
    async with Memory("memory://", config=QUIET) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="team", messages=from_openai(wire))
        sent = to_openai(turn.context.messages)
        await turn.end()
        stored = await memory.list_messages("t1")
    assert [(m["content"], m.get("name")) for m in sent if m["role"] == "user"] == [
        ("I'm vegetarian.", "alice"), ("What can't she eat?", "bob")]
    assert [m.metadata.get("name") for m in stored if m.role == "user"] == ["alice", "bob"]


def test_a_name_openai_would_refuse_is_kept_but_not_sent() -> None:
    [message] = from_openai([{"role": "user", "name": "Alice Smith", "content": "hi"}])
    assert message.metadata.get("name") == "Alice Smith"
    assert to_openai([message]) == [{"role": "user", "content": "hi"}]


async def test_agent_framework_keeps_who_said_what_in_later_runs() -> None:
    from agent_framework import Agent, BaseChatClient, ChatMiddlewareLayer, ChatResponse, FunctionInvocationLayer
    from agent_framework import Message as AFMessage

    from obsmem.integrations.agent_framework import ObservationalMemoryProvider

    calls: list[list[AFMessage]] = []

    class Client(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
        def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
            calls.append(list(messages))

            async def one() -> ChatResponse:
                return ChatResponse(messages=[AFMessage("assistant", ["noted"])])
            return one()

    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(Client(), "You help a team.",
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="team")])
        session = agent.create_session(session_id="standup")
        await agent.run(AFMessage("user", ["I'm vegetarian."], author_name="alice"), session=session)
        await agent.run(AFMessage("user", ["What can't she eat?"], author_name="bob"), session=session)
        stored = await memory.list_messages("standup")
    sent = {m.text: m.author_name for m in calls[-1] if m.role == "user"}
    assert sent == {"I'm vegetarian.": "alice", "What can't she eat?": "bob"}
    assert [m.metadata.get("name") for m in stored if m.role == "user"] == ["alice", "bob"]
