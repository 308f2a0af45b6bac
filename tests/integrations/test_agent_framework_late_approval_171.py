"""Agent Framework: an approval given after the user went on (helper-171).

A tool that needs approval ends a run with a user-input request; the user asks something else
first (obsmem closes the waiting call with a "no result" answer so the thread stays valid), then
approves. Agent Framework runs the tool and sent its result after everything else: a function
result no call precedes, and a second answer to its call. OpenAI refuses such a request (HTTP
400), after the approved tool ran. Now the model gets the real result once, in its call's place.
"""

from __future__ import annotations

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_review import CLIENTS, QUIET

pytestmark = pytest.mark.anyio


def _problems(sent: list[AFMessage]) -> list[str]:
    """What a provider refuses: a function result its call does not directly precede, a call
    answered twice or not at all."""
    problems: list[str] = []
    waiting: set[str] = set()
    answered: set[str] = set()
    for message in sent:
        calls = {c.call_id for c in message.contents if c.type == "function_call" and c.call_id}
        if message.role == "assistant":
            if waiting:
                problems.append(f"unanswered {sorted(waiting)}")
            waiting = calls
            continue
        for content in message.contents:
            if content.type == "function_result":
                if content.call_id in answered:
                    problems.append(f"{content.call_id} answered twice")
                elif content.call_id not in waiting:
                    problems.append(f"{content.call_id} answered with no call before it")
                waiting.discard(content.call_id or "")
                answered.add(content.call_id or "")
    return problems


def _results(sent: list[AFMessage]) -> list[object]:
    return [c.result for m in sent for c in m.contents if c.type == "function_result"]


@pytest.mark.parametrize("moved_on", [True, False])
async def test_a_late_approval_is_sent_once_in_its_place(moved_on: bool) -> None:
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

    client = CLIENTS["chat-middleware"](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[delete_file],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        asked = await agent.run("delete /tmp/x", session=session)
        if moved_on:
            await agent.run("actually, what time is it?", session=session)
        approval = AFMessage("user", [asked.user_input_requests[0].to_function_approval_response(True)])
        await agent.run(approval, session=session)
        assert deleted == ["/tmp/x"]
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["deleted /tmp/x"]
        await agent.run("thanks", session=session)
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["deleted /tmp/x"]


async def test_a_model_that_reuses_call_ids_gets_each_result_after_its_call() -> None:
    """A model that names every call ``call_0``: each run's result answers its own run's call."""
    answers = iter(["first", "second", "third"])

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return next(answers)

    def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user":
            return AFMessage("assistant", [Content.from_function_call("call_0", "lookup", arguments='{"q": "x"}')])
        return AFMessage("assistant", ["found"])

    client = CLIENTS["chat-middleware"](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[lookup],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        for question in ["one?", "two?", "three?"]:
            await agent.run(question, session=session)
    assert _results(client.calls[-1]) == ["first", "second", "third"]
    assert client.calls[-1][-1].contents[-1].type == "function_result"
