"""Microsoft Agent Framework: two runs of one session at once (a user who sends a second message
while the first is being answered) each keep their own bookkeeping (helper-179).

The provider kept a run's turn, the messages it had saved and (without the chat-middleware
layer) the tool calls stored as they ran in dicts keyed by thread. When the run begun first
ended while a later run of the thread was still in its tool loop, its ``after_run`` took the
later run's entries: the later run, ending, believed nothing of its loop was stored and stored
its tool call and result a second time (one call id answered twice; the next model request
carried both copies).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_framework import Agent, ChatResponse, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_review import CLIENTS, QUIET

pytestmark = pytest.mark.anyio


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Gates:
    """The model of both runs: each answer waits for its gate, so the test orders the runs."""

    def __init__(self) -> None:
        self.first_asked = asyncio.Event()
        self.first_go = asyncio.Event()
        self.second_after_tool = asyncio.Event()
        self.second_go = asyncio.Event()

    async def answer(self, sent: list[AFMessage]) -> AFMessage:
        last = sent[-1]
        if last.role == "user" and last.text == "first question":
            self.first_asked.set()
            await self.first_go.wait()
            return AFMessage("assistant", ["first answer"])
        if last.role == "user" and last.text == "second question, look it up":
            call = Content.from_function_call("call-2", "lookup", arguments='{"q": "x"}')
            return AFMessage("assistant", [call])
        if last.role == "tool":
            self.second_after_tool.set()
            await self.second_go.wait()
            return AFMessage("assistant", ["second answer"])
        return AFMessage("assistant", [f"answer to {last.text}"])


def gated(kind: str, gates: Gates) -> Any:
    class Gated(CLIENTS[kind]):  # type: ignore[misc,valid-type]
        def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
            sent = list(messages)
            self.calls.append(sent)

            async def one() -> ChatResponse:
                return ChatResponse(messages=[await gates.answer(sent)])

            return one()

    return Gated(lambda sent: AFMessage("assistant", ["unused"]))


@pytest.mark.parametrize("client_kind", list(CLIENTS))
async def test_a_run_ending_while_another_runs_its_tools_stores_nothing_twice(client_kind: str) -> None:
    gates = Gates()
    client = gated(client_kind, gates)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[lookup],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        def session() -> Any:  # a session object per run, all of thread "t"
            return agent.create_session(session_id="t")

        first = asyncio.ensure_future(agent.run("first question", session=session()))
        await gates.first_asked.wait()
        second = asyncio.ensure_future(agent.run("second question, look it up", session=session()))
        await gates.second_after_tool.wait()  # the second run's tool step is stored
        gates.first_go.set()
        assert (await first).text == "first answer"
        gates.second_go.set()
        assert (await second).text == "second answer"
        assert (await agent.run("third", session=session())).text == "answer to third"
        stored = await memory.list_messages("t")
    calls = [c.tool_call_id for m in stored for c in m.tool_calls]
    results = [r.tool_call_id for m in stored for r in m.tool_results]
    assert (calls, results) == (["call-2"], ["call-2"])
    assert [m.text for m in stored if m.role == "assistant" and m.text] == [
        "first answer", "second answer", "answer to third"
    ]
    sent = client.calls[-1]  # the third run's request: the loop once
    loop = [c.call_id for m in sent for c in m.contents if c.type.startswith("function")]
    assert loop == ["call-2", "call-2"]
