"""Microsoft Agent Framework: the app stops reading a streamed run once its tools ran (the user
closed the page), then the process restarts (helper-202): a new Memory over the same SQLite file
and a new provider continue the thread. What the tools returned is in the store as soon as they
returned, not held in the stopped run's process memory until the same provider runs again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolCallPart, ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


def _agent(memory: Memory, client: Any, tools: list[Any]) -> Agent[Any]:
    return Agent(client, "APP", tools=tools, context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])


async def _stop_after_results(agent: Agent[Any], question: str, kept: list[Any]) -> None:
    """Reads the stream until the tools' results show, then leaves it (never closed: the process
    is about to go; ``kept`` holds it so that nothing finishes it meanwhile)."""
    stream = agent.run(question, session=agent.create_session(session_id="c1"), stream=True)
    kept.append(stream)
    async for update in stream:
        if any(c.type == "function_result" for c in update.contents):
            break


def _stored(messages: list[Any]) -> tuple[list[str], list[object]]:
    calls = [p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    results = [p.result for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    return calls, results


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_tool_result_of_a_stopped_stream_survives_a_restart(client_kind: str, tmp_path: Path) -> None:
    sent_to: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent_to.append(to)
        return f"sent to {to}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "email bob":
            call = Content.from_function_call("e1", "send_email", arguments='{"to": "bob"}')
            return AFMessage("assistant", [Content.from_text("I will email bob."), call])
        return AFMessage("assistant", [f"done, {len(sent)} messages"])

    url = f"sqlite:///{tmp_path / 'm.db'}"
    kept: list[Any] = []
    async with Memory(url, config=QUIET) as memory:
        await _stop_after_results(_agent(memory, STREAMS[client_kind](model), [send_email]), "email bob", kept)
        assert sent_to == ["bob"]
        assert _stored(await memory.list_messages("c1")) == (["e1"], ["sent to bob"])  # stored already

    async with Memory(url, config=QUIET) as memory:  # a new process
        client = STREAMS[client_kind](model)
        agent = _agent(memory, client, [send_email])
        await agent.run("did it go out?", session=agent.create_session(session_id="c1"))
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["sent to bob"]
        stored = await memory.list_messages("c1")
        assert _stored(stored) == (["e1"], ["sent to bob"])
        # without the chat-middleware layer only the call is known as the tool runs, not the text with it
        said = "I will email bob." if client_kind == "chat-middleware" else ""
        assert [(m.role, m.text.strip()) for m in stored] == [
            ("user", "email bob"), ("assistant", said), ("tool", ""),
            ("user", "did it go out?"), ("assistant", "done, 4 messages"),
        ]
    assert sent_to == ["bob"]
    kept.clear()


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_two_tools_of_one_response_survive_a_restart(client_kind: str, tmp_path: Path) -> None:
    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "weather in Oslo and Rome?":
            return AFMessage("assistant", [
                Content.from_function_call("w1", "weather", arguments='{"city": "Oslo"}'),
                Content.from_function_call("w2", "weather", arguments='{"city": "Rome"}'),
            ])
        return AFMessage("assistant", ["both sunny"])

    url = f"sqlite:///{tmp_path / 'm.db'}"
    kept: list[Any] = []
    async with Memory(url, config=QUIET) as memory:
        await _stop_after_results(_agent(memory, STREAMS[client_kind](model), [weather]),
                                  "weather in Oslo and Rome?", kept)

    async with Memory(url, config=QUIET) as memory:
        client = STREAMS[client_kind](model)
        agent = _agent(memory, client, [weather])
        await agent.run("and now?", session=agent.create_session(session_id="c1"))
        assert _problems(client.calls[-1]) == []
        assert sorted(map(str, _results(client.calls[-1]))) == ["sunny in Oslo", "sunny in Rome"]
        calls, results = _stored(await memory.list_messages("c1"))
        assert (sorted(calls), sorted(map(str, results))) == (["w1", "w2"], ["sunny in Oslo", "sunny in Rome"])
    kept.clear()


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("detailed", [False, True])
async def test_a_failed_tool_of_a_stopped_stream_is_stored_as_the_model_got_it(
    detailed: bool, client_kind: str, tmp_path: Path
) -> None:
    """The tool raises; Agent Framework tells the model it failed (the exception's text only with
    ``include_detailed_errors``: it may hold what the app keeps from the model). Memory holds
    that, and a later run, in a new process, sends that."""

    @tool
    def charge(card: str) -> str:
        """Charge a card."""
        raise RuntimeError(f"gateway refused card {card} for account 7731")

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "charge my card":
            return AFMessage("assistant", [Content.from_function_call("c1", "charge", arguments='{"card": "4417"}')])
        return AFMessage("assistant", ["sorry"])

    url = f"sqlite:///{tmp_path / 'm.db'}"
    config = {"include_detailed_errors": detailed}
    kept: list[Any] = []
    first = STREAMS[client_kind](model, function_invocation_configuration=config)
    async with Memory(url, config=QUIET) as memory:
        await _stop_after_results(_agent(memory, first, [charge]), "charge my card", kept)

    async with Memory(url, config=QUIET) as memory:
        client = STREAMS[client_kind](model, function_invocation_configuration=config)
        agent = _agent(memory, client, [charge])
        await agent.run("what happened?", session=agent.create_session(session_id="c1"))
        assert _problems(client.calls[-1]) == []
        stored = [p for m in await memory.list_messages("c1") for p in m.parts if isinstance(p, ToolResultPart)]
        assert [(p.result, p.is_error) for p in stored] == [("Error: Function failed." + (
            " Exception: gateway refused card 4417 for account 7731" if detailed else ""), True)]
        assert ("7731" in str(_results(client.calls[-1]))) is detailed
    kept.clear()


async def test_the_question_asked_again_after_a_restart_does_not_run_the_tool_again(tmp_path: Path) -> None:
    """The page closed once the email went; the user, back after a restart, asks again: the
    model gets the question with the call and its result, and answers from them (a client with
    the chat-middleware layer, which places them after the question)."""
    client_kind = "chat-middleware"
    sent_to: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent_to.append(to)
        return f"sent to {to}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "email bob":
            return AFMessage("assistant", [Content.from_function_call("e1", "send_email", arguments='{"to": "bob"}')])
        return AFMessage("assistant", ["done"])

    url = f"sqlite:///{tmp_path / 'm.db'}"
    kept: list[Any] = []
    async with Memory(url, config=QUIET) as memory:
        await _stop_after_results(_agent(memory, STREAMS[client_kind](model), [send_email]), "email bob", kept)

    async with Memory(url, config=QUIET) as memory:
        client = STREAMS[client_kind](model)
        agent = _agent(memory, client, [send_email])
        await agent.run("email bob", session=agent.create_session(session_id="c1"))
        assert sent_to == ["bob"]
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["sent to bob"]
        stored = await memory.list_messages("c1")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    kept.clear()
