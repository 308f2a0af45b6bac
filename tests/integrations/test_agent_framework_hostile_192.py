"""Microsoft Agent Framework with ObservationalMemoryProvider, used as an app would (helper-192):
an approval given late with a chat client built without the chat-middleware layer, streaming,
several runs of one session at once, a run stopped mid-stream, the thread deleted mid-run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
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

from obsmem import Memory
from obsmem.errors import ThreadNotFoundError
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolCallPart, ToolResultPart
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import CLIENTS, QUIET

pytestmark = pytest.mark.anyio


async def _run(agent: Agent[Any], message: Any, session: Any, stream: bool) -> Any:
    if not stream:
        return await agent.run(message, session=session)
    response = agent.run(message, session=session, stream=True)
    async for _ in response:
        pass
    return await response.get_final_response()


@pytest.mark.parametrize("client_kind", list(CLIENTS))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("moved_on", [True, False])
async def test_a_late_approval_reaches_the_model_once_in_its_place(
    moved_on: bool, stream: bool, client_kind: str
) -> None:
    deleted: list[str] = []

    @tool(approval_mode="always_require")
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "delete /tmp/x":
            return AFMessage("assistant", [Content.from_function_call("d1", "delete_file",
                                                                      arguments='{"path": "/tmp/x"}')])
        return AFMessage("assistant", [f"answer {len(client.calls)}"])

    client = CLIENTS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[delete_file],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        asked = await _run(agent, "delete /tmp/x", session, stream)
        if moved_on:
            await _run(agent, "actually, what time is it?", session, stream)
        approval = AFMessage("user", [asked.user_input_requests[0].to_function_approval_response(True)])
        await _run(agent, approval, session, stream)
        assert deleted == ["/tmp/x"]
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["deleted /tmp/x"]
        await _run(agent, "thanks", session, stream)
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["deleted /tmp/x"]
        stored = [p.result for m in await memory.list_messages("c1") for p in m.parts if isinstance(p, ToolResultPart)]
        assert stored == ["deleted /tmp/x"], stored


# -- a run the app stops mid-stream ---------------------------------------------------------------

AsyncScript = Callable[[list[AFMessage]], Awaitable[AFMessage]]


class WordStream(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """A chat client whose model is an async ``script``; streamed, its text comes a word at a time."""

    def __init__(self, script: AsyncScript, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.calls: list[list[AFMessage]] = []

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        sent = list(messages)
        self.calls.append(sent)
        if stream:
            async def updates() -> Any:
                reply = await self.script(sent)
                for content in reply.contents:
                    words = content.text.split(" ") if content.type == "text" and content.text else None
                    for chunk in [Content.from_text(w + " ") for w in words] if words else [content]:
                        yield ChatResponseUpdate(role="assistant", contents=[chunk], message_id="m1")

            return self._build_response_stream(updates())

        async def one() -> ChatResponse:
            return ChatResponse(messages=[await self.script(sent)])

        return one()


class BareWordStream(FunctionInvocationLayer, BaseChatClient):
    """:class:`WordStream` without the chat-middleware layer."""

    def __init__(self, script: AsyncScript, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.calls: list[list[AFMessage]] = []

    _inner_get_response = WordStream._inner_get_response


STREAMS: dict[str, type[WordStream] | type[BareWordStream]] = {
    "chat-middleware": WordStream, "no-chat-middleware": BareWordStream
}


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_tool_that_ran_before_the_app_left_the_stream_is_stored(client_kind: str) -> None:
    """The app stops reading a streamed run once it shows the tool's result (the user closed the
    page): no next model call comes, which stored the tool loop's step. The next run of the
    session stores the call and its result: the tool ran (an email was sent)."""
    sent_to: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent_to.append(to)
        return f"sent to {to}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "email bob":
            return AFMessage("assistant", [Content.from_function_call("e1", "send_email", arguments='{"to": "bob"}')])
        return AFMessage("assistant", [f"done, {len(client.calls)} calls so far"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[send_email],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        stream = agent.run("email bob", session=session, stream=True)
        async for update in stream:
            if any(c.type == "function_result" for c in update.contents):
                break
        assert sent_to == ["bob"]
        await agent.run("did it go out?", session=session)
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["sent to bob"]
        stored = await memory.list_messages("c1")
        calls = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart)]
        assert (calls, results) == (["e1"], ["sent to bob"])
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_an_answer_the_app_stopped_reading_leaves_the_question(client_kind: str) -> None:
    async def model(sent: list[AFMessage]) -> AFMessage:
        return AFMessage("assistant", [f"a long answer to {sent[-1].text} in many words"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        async for _ in agent.run("first", session=session, stream=True):
            break
        await agent.run("second", session=session)
        assert [(m.role, m.text) for m in client.calls[-1]] == [("user", "first"), ("user", "second")]
        stored = await memory.list_messages("c1")
        assert [(m.role, m.text) for m in stored][:2] == [("user", "first"), ("user", "second")]


# -- several runs of one session at once --------------------------------------------------------


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_five_runs_of_one_session_at_once_each_answer_their_calls_once(stream: bool, client_kind: str) -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        last = sent[-1]
        await asyncio.sleep(0)
        if last.role == "user" and (last.text or "").startswith("q"):
            call = Content.from_function_call(f"call-{last.text}", "lookup", arguments=f'{{"q": "{last.text}"}}')
            return AFMessage("assistant", [call])
        return AFMessage("assistant", [f"answer {len(client.calls)}"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[lookup],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        await asyncio.gather(*(_run(agent, f"q{i}", session, stream) for i in range(5)))
        await agent.run("after", session=session)
        for sent in client.calls:
            assert _problems(sent) == []
        stored = await memory.list_messages("c1")
        calls = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolResultPart)]
        assert sorted(calls) == [f"call-q{i}" for i in range(5)]
        assert sorted(results) == sorted(calls)


# -- the thread deleted mid-run -----------------------------------------------------------------


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_thread_deleted_mid_run_stays_deleted(stream: bool, client_kind: str) -> None:
    """The user deletes the conversation while its run is in its tool loop: the run fails (its
    turn cannot end in a deleted thread) and nothing of it comes back; the session goes on."""
    box: list[Memory] = []

    @tool
    def save_card() -> str:
        """Save the card."""
        return "saved"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and "4417" in (sent[-1].text or ""):
            return AFMessage("assistant", [Content.from_function_call("s1", "save_card", arguments="{}")])
        if sent[-1].role == "tool":
            await box[0].delete_thread("c1")
            return AFMessage("assistant", ["card 4417-8823 saved"])
        return AFMessage("assistant", ["hello"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        box.append(memory)
        agent = Agent(client, "APP", tools=[save_card],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        with pytest.raises(ThreadNotFoundError):
            await _run(agent, "my card is 4417-8823", session, stream)
        await _run(agent, "hi", session, stream)
        assert not any("4417" in (m.text or "") for m in client.calls[-1])
        stored = await memory.list_messages("c1")
        assert [(m.role, m.text.strip()) for m in stored] == [("user", "hi"), ("assistant", "hello")]


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_stopped_run_of_a_thread_deleted_since_leaves_nothing(client_kind: str) -> None:
    """The app stops reading a run after its tool ran, then the user deletes the conversation:
    the next run starts the thread afresh, without what the stopped run did."""

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}: card 4417-8823"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "email bob my card":
            return AFMessage("assistant", [Content.from_function_call("e1", "send_email", arguments='{"to": "bob"}')])
        return AFMessage("assistant", ["ok"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[send_email],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        async for update in agent.run("email bob my card", session=session, stream=True):
            if any(c.type == "function_result" for c in update.contents):
                break
        await memory.delete_thread("c1")
        await agent.run("hi", session=session)
        assert [(m.role, m.text) for m in client.calls[-1]] == [("user", "hi")]
        stored = await memory.list_messages("c1")
        assert [(m.role, m.text.strip()) for m in stored] == [("user", "hi"), ("assistant", "ok")]
