"""Microsoft Agent Framework: what obsmem stores for a tool call is what Agent Framework told the
model (helper-204). A model that sends arguments the tool refuses, a tool that asks for user input
or aborts the run, and parallel calls of which one needs approval the user gives after moving on."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Agent, Content, MiddlewareFailure, UserInputRequiredException, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


def _agent(memory: Memory, client: Any, tools: list[Any]) -> Agent[Any]:
    return Agent(client, "APP", tools=tools, context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])


async def _stored_results(memory: Memory) -> list[object]:
    return [p.result for m in await memory.list_messages("c1") for p in m.parts if isinstance(p, ToolResultPart)]


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("detailed", [False, True])
async def test_arguments_the_tool_refuses_are_stored_as_the_model_was_told(
    detailed: bool, stream: bool, client_kind: str
) -> None:
    """The model sends a number where the tool takes a string: Agent Framework tells it the
    arguments could not be parsed (it can fix them), not that the tool failed."""

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "look up 5":
            return AFMessage("assistant", [Content.from_function_call("c1", "lookup", arguments='{"q": 5}')])
        return AFMessage("assistant", ["sorry"])

    client = STREAMS[client_kind](model)
    client.function_invocation_configuration["include_detailed_errors"] = detailed
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [lookup])
        session = agent.create_session(session_id="c1")
        await _run(agent, "look up 5", session, stream)
        told = _results(client.calls[-1])
        assert len(told) == 1 and str(told[0]).startswith("Error: Argument parsing failed.")
        await _run(agent, "and now?", session, stream)
        assert _results(client.calls[-1]) == told
        assert await _stored_results(memory) == told


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_asking_for_user_input_is_no_tool_failure(stream: bool, client_kind: str) -> None:
    @tool
    def book() -> str:
        """Book the table."""
        raise UserInputRequiredException(contents=[])

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "book it":
            return AFMessage("assistant", [Content.from_function_call("b1", "book", arguments="{}")])
        return AFMessage("assistant", ["ok"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [book])
        session = agent.create_session(session_id="c1")
        await _run(agent, "book it", session, stream)
        told = _results(client.calls[-1])
        assert told == ["Tool requires user input but no request details were provided."]
        await _run(agent, "well?", session, stream)
        assert _results(client.calls[-1]) == told
        assert await _stored_results(memory) == told


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_that_aborts_the_run_is_not_stored_as_failed(stream: bool, client_kind: str) -> None:
    """MiddlewareFailure (a guardrail) aborts the run: the model is told nothing of the tool, and
    the next run does not tell it the tool failed."""

    @tool
    def transfer(amount: int) -> str:
        """Transfer money."""
        raise MiddlewareFailure("blocked by policy")

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "send 100":
            return AFMessage("assistant", [Content.from_function_call("t1", "transfer", arguments='{"amount": 100}')])
        return AFMessage("assistant", ["ok"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [transfer])
        session = agent.create_session(session_id="c1")
        with pytest.raises(MiddlewareFailure):
            await _run(agent, "send 100", session, stream)
        await _run(agent, "hello", session, stream)
        sent = client.calls[-1]
        assert _problems(sent) == []
        assert "Error: Function failed." not in _results(sent)
        assert "Error: Function failed." not in await _stored_results(memory)


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("approved", [True, False])
async def test_a_late_approval_of_one_of_parallel_calls_answers_each_call_once(
    approved: bool, stream: bool, client_kind: str
) -> None:
    """The model asks for a lookup and a deletion at once; the deletion needs approval, so Agent
    Framework holds both. The user asks something else first, then decides: both run (or the
    lookup alone), and each of the two calls gets its one answer in its place."""
    deleted: list[str] = []

    @tool(approval_mode="always_require")
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "look up x and delete /p":
            return AFMessage("assistant", [
                Content.from_text("Sure."),
                Content.from_function_call("a", "lookup", arguments='{"q": "x"}'),
                Content.from_function_call("b", "delete_file", arguments='{"path": "/p"}'),
            ])
        return AFMessage("assistant", [f"answer {len(sent)}"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [lookup, delete_file])
        session = agent.create_session(session_id="c1")
        asked = await _run(agent, "look up x and delete /p", session, stream)
        await _run(agent, "what time is it?", session, stream)
        approval = AFMessage("user", [r.to_function_approval_response(approved) for r in asked.user_input_requests])
        await _run(agent, approval, session, stream)
        assert deleted == (["/p"] if approved else [])
        assert _problems(client.calls[-1]) == []
        told = _results(client.calls[-1])
        assert told[0] == "found x" and len(told) == 2
        await _run(agent, "thanks", session, stream)
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == told
        assert await _stored_results(memory) == told
