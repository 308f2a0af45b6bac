"""Microsoft Agent Framework: a run that failed after its tools ran, run again with the same
question (helper-141).

The provider fails at the model call after a tool (a 500 mid-loop); the user runs the agent again
with the same question. obsmem had stored the question, the calls and their results; the retry
stored the question again after them and the model got it twice (and later runs too). Now the
retry takes the stored question: the model gets it once, followed by the steps that ran (in their
order, though Agent Framework places context messages before the input), and answers from their
results: the tool does not run again. The same question after an answer, or while an approval
waits, is a new message, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    tool,
)
from agent_framework import Message as AFMessage

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.integrations.agent_framework import ObservationalMemoryProvider

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)
QUESTION = "What is the weather in Oslo and in Bergen?"


class Weather(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """A model that calls the weather tool for Oslo, then Bergen, then answers; its call made once
    ``fail`` tool results are in the conversation raises, once (the provider down)."""

    def __init__(self, fail: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail = fail
        self.calls: list[list[AFMessage]] = []

    def reply(self, sent: list[AFMessage]) -> AFMessage:
        results = sum(1 for m in sent for c in m.contents if c.type == "function_result")
        if results == self.fail:
            self.fail = None
            raise RuntimeError("provider 500")
        if sent[-1].role == "user" and results % 2 == 0:
            city = "Oslo"
        elif results % 2 == 1:
            city = "Bergen"
        else:
            return AFMessage("assistant", ["Oslo: snow, Bergen: rain"])
        return AFMessage("assistant", [Content.from_function_call(
            f"{city}-{len(self.calls)}", "weather", arguments=f'{{"city": "{city}"}}')])

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        sent = list(messages)
        self.calls.append(sent)
        if stream:
            async def updates() -> Any:
                reply = self.reply(sent)
                yield ChatResponseUpdate(role="assistant", contents=reply.contents, message_id=reply.message_id)

            return self._build_response_stream(updates())

        async def one() -> ChatResponse:
            return ChatResponse(messages=[self.reply(sent)])

        return one()


def _shape(sent: list[AFMessage]) -> list[tuple[str, str]]:
    out = []
    for message in sent:
        for content in message.contents:
            if content.type == "function_call":
                out.append((message.role, f"call {content.call_id}"))
            elif content.type == "function_result":
                out.append((message.role, f"result {content.call_id}"))
            elif content.type == "text":
                out.append((message.role, content.text or ""))
    return out


def _valid(sent: list[AFMessage]) -> bool:
    waiting: set[str] = set()
    for message in sent:
        for content in message.contents:
            if content.type == "function_result":
                if content.call_id not in waiting:
                    return False
                waiting.discard(content.call_id)
            elif waiting:
                return False
        waiting |= {c.call_id for c in message.contents if c.type == "function_call" and c.call_id}
    return not waiting


async def _run(agent: Agent[Any], message: str, session: Any, stream: bool) -> str:
    if not stream:
        return (await agent.run(message, session=session)).text
    response = agent.run(message, session=session, stream=True)
    async for _ in response:
        pass
    return (await response.get_final_response()).text


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("fail", [1, 2], ids=["after-one-tool", "after-two-tools"])
async def test_a_run_failed_after_its_tools_is_retried_with_the_question_stored_and_sent_once(
    fail: int, stream: bool
) -> None:
    ran: list[str] = []

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"{city}: {'snow' if city == 'Oslo' else 'rain'}"

    client = Weather(fail)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "You are a weather bot.", tools=[weather],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        with pytest.raises(Exception, match="provider 500"):
            await _run(agent, QUESTION, session, stream)
        assert ran == ["Oslo", "Bergen"][:fail]
        first_retry = len(client.calls)
        assert await _run(agent, QUESTION, session, stream) == "Oslo: snow, Bergen: rain"
        for sent in client.calls[first_retry:]:
            shape = _shape(sent)
            assert shape.count(("user", QUESTION)) == 1, shape
            assert shape[0] == ("user", QUESTION), shape  # the steps that ran follow the question
            assert _valid(sent), shape
        assert ran == ["Oslo", "Bergen"]  # no tool ran twice
        stored = await memory.list_messages("c1")
        assert [m.text for m in stored if m.role == "user"] == [QUESTION]
        assert len([c for m in stored for c in m.tool_calls]) == 2
        assert len([r for m in stored for r in m.tool_results]) == 2
        assert stored[-1].text == "Oslo: snow, Bergen: rain"
        # a later run sends the question once, in its place
        await _run(agent, "Thanks!", session, stream)
        shape = _shape(client.calls[-1])
        assert shape.count(("user", QUESTION)) == 1 and shape[0] == ("user", QUESTION), shape
        assert _valid(client.calls[-1])


async def test_the_same_question_while_an_approval_waits_is_a_new_message() -> None:
    @tool(approval_mode="always_require")
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    class Asks(Weather):
        def reply(self, sent: list[AFMessage]) -> AFMessage:
            return AFMessage("assistant", [Content.from_function_call(
                f"d{len(self.calls)}", "delete_file", arguments='{"path": "/tmp/x"}')])

    client = Asks(None)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[delete_file],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        for _ in range(2):
            assert (await agent.run("delete /tmp/x", session=session)).user_input_requests
        stored = await memory.list_messages("c1")
    assert [m.text for m in stored if m.role == "user"] == ["delete /tmp/x", "delete /tmp/x"]
