"""Microsoft Agent Framework: an Agent with ObservationalMemoryProvider over a scripted chat client.

The chat client is built as Agent Framework builds its own (function invocation, chat middleware
and the base client); only the model is scripted. What the model received and what obsmem
stored are checked.
"""

from __future__ import annotations

from collections.abc import Callable
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

QUIET = MemoryConfig(  # nothing is observed in these short conversations: the raw tail is what is sent
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)

Script = Callable[[list[AFMessage]], AFMessage]


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """A chat client whose model is ``script``: it gets the messages sent and returns one message."""

    def __init__(self, script: Script, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.calls: list[list[AFMessage]] = []

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        sent = list(messages)
        self.calls.append(sent)
        if stream:
            async def updates() -> Any:
                reply = self.script(sent)  # raises inside the stream, as a provider error does
                yield ChatResponseUpdate(
                    role="assistant", contents=reply.contents, message_id=reply.message_id
                )

            return self._build_response_stream(updates())

        async def one() -> ChatResponse:
            return ChatResponse(messages=[self.script(sent)])

        return one()


class BareClient(FunctionInvocationLayer, BaseChatClient):
    """A client built without Agent Framework's chat-middleware layer (only function invocation)."""

    def __init__(self, script: Script, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.calls: list[list[AFMessage]] = []

    _inner_get_response = ScriptedClient._inner_get_response


CLIENTS: dict[str, type[ScriptedClient] | type[BareClient]] = {
    "chat-middleware": ScriptedClient, "no-chat-middleware": BareClient
}


def contents(messages: list[AFMessage]) -> list[dict[str, Any]]:
    return [c.to_dict() for m in messages for c in m.contents]


async def run(agent: Agent[Any], message: Any, session: Any, stream: bool) -> str:
    if not stream:
        return (await agent.run(message, session=session)).text
    response = agent.run(message, session=session, stream=True)
    async for _ in response:
        pass
    return (await response.get_final_response()).text


# -- 1. provider message ids --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeated_provider_message_id_keeps_every_answer_in_order(stream: bool) -> None:
    """A server that numbers its completions per conversation sends ``chatcmpl-1`` each time
    (streamed, Agent Framework takes ``message_id`` from the chunk id)."""
    answers = iter(f"answer number {n}" for n in range(1, 4))
    client = ScriptedClient(lambda sent: AFMessage("assistant", [next(answers)], message_id="chatcmpl-1"))
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        for question in ["first question", "second question", "third question"]:
            await run(agent, question, session, stream)
        stored = await memory.list_messages("c1")
    assert [(m.role, m.text) for m in stored] == [
        ("user", "first question"), ("assistant", "answer number 1"),
        ("user", "second question"), ("assistant", "answer number 2"),
        ("user", "third question"), ("assistant", "answer number 3"),
    ]
    assert [m.text for m in client.calls[-1]] == [
        "first question", "answer number 1", "second question", "answer number 2", "third question"
    ]
    assert "chatcmpl-1" not in {m.id for m in stored}  # a provider's id is not obsmem's id


async def test_the_same_provider_message_id_in_another_users_thread_is_another_message() -> None:
    client = ScriptedClient(
        lambda sent: AFMessage("assistant", [f"hello {sent[-1].text}"], message_id="chatcmpl-1")
    )
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", context_providers=[ObservationalMemoryProvider(memory)])
        for user in ["alice", "bob"]:
            reply = await agent.run(user, session=agent.create_session(session_id=f"af-{user}"))
            assert reply.text == f"hello {user}"
        stored = {user: await memory.list_messages(f"af-{user}") for user in ["alice", "bob"]}
    for user, messages in stored.items():
        assert [(m.role, m.text) for m in messages] == [("user", user), ("assistant", f"hello {user}")]
    assert stored["alice"][1].id != stored["bob"][1].id


async def test_history_sent_again_with_its_ids_is_stored_once() -> None:
    """An application that sends its whole conversation each time, with its own ids, and one that
    sends back what ``get_messages`` gave it: nothing is stored twice."""
    client = ScriptedClient(
        lambda sent: AFMessage("assistant", [f"re: {sent[-1].text}"], message_id="chatcmpl-1")
    )
    async with Memory("memory://", config=QUIET) as memory:
        provider = ObservationalMemoryProvider(memory, resource_id="u")
        agent = Agent(client, "APP", context_providers=[provider])
        session = agent.create_session(session_id="c1")
        first = AFMessage("user", ["my name is Dana"], message_id="app-1")
        reply = await agent.run(first, session=session)
        answer = AFMessage("assistant", [reply.text], message_id="chatcmpl-1")
        second = AFMessage("user", ["I live in Oslo"], message_id="app-2")
        await agent.run([first, answer, second], session=session)
        again = await provider.get_messages("c1")
        third = AFMessage("user", ["what do you know?"], message_id="app-3")
        await agent.run([*again, third], session=session)
        stored = await memory.list_messages("c1")
    assert [(m.role, m.text) for m in stored] == [
        ("user", "my name is Dana"), ("assistant", "re: my name is Dana"),
        ("user", "I live in Oslo"), ("assistant", "re: I live in Oslo"),
        ("user", "what do you know?"), ("assistant", "re: what do you know?"),
    ]


# -- 2. content obsmem has no part for ----------------------------------------------------------


async def test_hosted_files_reach_the_model_in_later_turns() -> None:
    client = ScriptedClient(lambda sent: AFMessage("assistant", ["ok"]))
    async with Memory("memory://", config=QUIET) as memory:
        provider = ObservationalMemoryProvider(memory, resource_id="u")
        agent = Agent(client, "APP", context_providers=[provider])
        session = agent.create_session(session_id="c1")
        await agent.run(AFMessage("user", [Content.from_hosted_file("file-X1234567", name="lease.pdf")]),
                        session=session)
        await agent.run(AFMessage("user", ["summarize this", Content.from_hosted_file("file-Y7654321")]),
                        session=session)
        await agent.run("what was in the files?", session=session)
        kept = await provider.get_messages("c1")
    last = client.calls[-1]
    assert [(m.role, [c.type for c in m.contents]) for m in last] == [
        ("user", ["hosted_file"]), ("assistant", ["text"]),
        ("user", ["text", "hosted_file"]), ("assistant", ["text"]),
        ("user", ["text"]),
    ]
    files = [c for m in last for c in m.contents if c.type == "hosted_file"]
    assert [(c.file_id, c.name) for c in files] == [("file-X1234567", "lease.pdf"), ("file-Y7654321", None)]
    assert last[2].contents[0].text == "summarize this"
    assert contents(kept[:4]) == contents(last[:4])  # the raw thread gives them back the same way


# -- 3. a run that fails after a tool ran -------------------------------------------------------


@pytest.mark.parametrize("client_kind", list(CLIENTS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_that_ran_before_the_model_failed_is_stored(stream: bool, client_kind: str) -> None:
    sent_emails: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent_emails.append(to)
        return f"email sent to {to}"

    def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "tool" and len(sent_emails) == 1 and not any(m.text == "did it?" for m in sent):
            raise RuntimeError("provider 500")
        if sent[-1].role == "user" and sent[-1].text == "email my boss":
            call = Content.from_function_call("e1", "send_email", arguments='{"to": "boss"}')
            return AFMessage("assistant", [call])
        return AFMessage("assistant", ["yes, the email to boss was sent"])

    client = CLIENTS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        provider = ObservationalMemoryProvider(memory, resource_id="u")
        agent = Agent(client, "APP", tools=[send_email], context_providers=[provider])
        session = agent.create_session(session_id="c1")
        with pytest.raises(Exception, match="provider 500"):
            await run(agent, "email my boss", session, stream)
        after_failure = await memory.list_messages("c1")
        assert await run(agent, "did it?", session, stream) == "yes, the email to boss was sent"
        stored = await memory.list_messages("c1")
    assert sent_emails == ["boss"]

    def shape(messages: list[Any]) -> list[tuple[str, str]]:
        return [(m.role, "call" if m.tool_calls else "result" if m.tool_results else m.text)
                for m in messages]

    assert shape(after_failure) == [("user", "email my boss"), ("assistant", "call"), ("tool", "result")]
    assert after_failure[2].tool_results[0].tool_name == "send_email"
    assert after_failure[2].tool_results[0].result == "email sent to boss"
    assert shape(stored) == [*shape(after_failure), ("user", "did it?"),
                             ("assistant", "yes, the email to boss was sent")]
    # the next run's model sees the call and its result
    assert [(m.role, [c.type for c in m.contents]) for m in client.calls[-1]] == [
        ("user", ["text"]), ("assistant", ["function_call"]), ("tool", ["function_result"]),
        ("user", ["text"]),
    ]


@pytest.mark.parametrize("client_kind", list(CLIENTS))
async def test_a_tool_loop_that_succeeds_is_stored_once(client_kind: str) -> None:
    @tool
    def weather(city: str) -> str:
        """The weather."""
        return f"{city}: snow"

    def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user":
            return AFMessage("assistant", [Content.from_function_call(f"w{len(sent)}", "weather",
                                                                      arguments='{"city": "Oslo"}')],
                             message_id="chatcmpl-1")
        if sum(m.role == "tool" for m in sent) % 2:  # a second step in the same run
            return AFMessage("assistant", [Content.from_function_call(f"w{len(sent)}", "weather",
                                                                      arguments='{"city": "Bergen"}')],
                             message_id="chatcmpl-1")
        return AFMessage("assistant", ["snow in both"], message_id="chatcmpl-1")

    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(CLIENTS[client_kind](model), "APP", tools=[weather],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        for question in ["weather?", "and again?"]:
            assert (await agent.run(question, session=session)).text == "snow in both"
        stored = await memory.list_messages("c1")
    shape = [(m.role, "call" if m.tool_calls else "result" if m.tool_results else m.text) for m in stored]
    one_run = [("assistant", "call"), ("tool", "result"), ("assistant", "call"), ("tool", "result"),
               ("assistant", "snow in both")]
    assert shape == [("user", "weather?"), *one_run, ("user", "and again?"), *one_run]


@pytest.mark.parametrize("client_kind", list(CLIENTS))
async def test_an_approved_tool_is_stored_once_with_its_call(client_kind: str) -> None:
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
        if sent[-1].role == "tool" and not any(m.text == "thanks" for m in sent):
            raise RuntimeError("provider 500")  # after the approved tool ran
        return AFMessage("assistant", ["done"])

    client = CLIENTS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[delete_file],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        asked = await agent.run("delete /tmp/x", session=session)
        approval = AFMessage("user", [asked.user_input_requests[0].to_function_approval_response(True)])
        with pytest.raises(Exception, match="provider 500"):
            await agent.run(approval, session=session)
        assert (await agent.run("thanks", session=session)).text == "done"
        stored = await memory.list_messages("c1")
    assert deleted == ["/tmp/x"]
    calls = [c for m in stored for c in m.tool_calls]
    results = [r for m in stored for r in m.tool_results]
    assert [c.tool_call_id for c in calls] == ["d1"]
    assert [(r.tool_call_id, r.tool_name, r.result) for r in results] == [
        ("d1", "delete_file", "deleted /tmp/x")
    ]
    sent = client.calls[-1]
    assert [c.type for m in sent for c in m.contents if c.type.startswith("function")] == [
        "function_call", "function_result"
    ]
