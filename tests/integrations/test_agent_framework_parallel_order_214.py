"""Microsoft Agent Framework: parallel tool calls whose tools finish in another order than the
model called them (helper 214).
"""

from __future__ import annotations

import asyncio

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolCallPart, ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_parallel_tool_results_are_stored_in_the_order_of_the_calls(client_kind: str, stream: bool) -> None:
    """The model is told the results in the order of its calls; the thread keeps them so, and the
    next run sends them as the model saw them (a prompt cache hit, the same history)."""
    @tool
    async def slow(q: str) -> str:
        """Slow."""
        await asyncio.sleep(0.05)
        return "slow " + q

    @tool
    async def boom(q: str) -> str:
        """Fails."""
        raise RuntimeError("secret-detail")

    @tool
    def fast(q: str) -> str:
        """Fast."""
        return "fast " + q

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "go":
            return AFMessage("assistant", [
                Content.from_text("Working."),
                Content.from_function_call("a", "slow", arguments='{"q": "1"}'),
                Content.from_function_call("b", "boom", arguments='{"q": "2"}'),
                Content.from_function_call("c", "fast", arguments='{"q": "3"}'),
                Content.from_function_call("d", "fast", arguments='{"q": 5}'),  # refused arguments
            ])
        return AFMessage("assistant", [f"done {len(sent)}"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[slow, boom, fast],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        await _run(agent, "go", session, stream)
        told = _results(client.calls[-1])
        assert told == ["slow 1", "Error: Function failed.", "fast 3", "Error: Argument parsing failed."]
        await _run(agent, "next", session, stream)
        assert _results(client.calls[-1]) == told
        assert _problems(client.calls[-1]) == []
        stored = await memory.list_messages("c1")
        order = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart | ToolResultPart)]
        if client_kind == "chat-middleware":  # the response with its calls, then their results
            assert order == ["a", "b", "c", "d", "a", "b", "c", "d"]
        else:  # without the layer each call is stored alone, with its result
            assert order == ["a", "a", "b", "b", "c", "c", "d", "d"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_result_held_for_an_earlier_call_is_stored_when_the_run_is_cancelled(
    client_kind: str, stream: bool
) -> None:
    """The second tool returned (an email sent) while the first still ran, then the app cancelled
    the run (a timeout): the email's call and result stay stored, and the next request is valid."""
    sent_to: list[str] = []

    @tool
    async def wait_forever() -> str:
        """Waits."""
        await asyncio.Event().wait()
        return "never"

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent_to.append(to)
        return f"sent to {to}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "go":
            return AFMessage("assistant", [
                Content.from_function_call("a", "wait_forever", arguments="{}"),
                Content.from_function_call("b", "send_email", arguments='{"to": "bob"}'),
            ])
        return AFMessage("assistant", [f"done {len(sent)}"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[wait_forever, send_email],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        task = asyncio.ensure_future(_run(agent, "go", session, stream))
        while not sent_to:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        stored = await memory.list_messages("c1")
        calls = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart)]
        assert "b" in calls and "sent to bob" in results, (calls, results)
        await _run(agent, "did you send it?", session, stream)
        assert _problems(client.calls[-1]) == []
        assert "sent to bob" in _results(client.calls[-1])
