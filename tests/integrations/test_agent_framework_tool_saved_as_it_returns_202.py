"""Microsoft Agent Framework: each tool's call and result are stored as the tool returns
(helper-202). What obsmem does there never changes what the model is told of the tool: a tool
that ran is never reported to the model as failed."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.errors import ThreadNotFoundError
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS
from tests.integrations.test_agent_framework_late_approval_171 import _results
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


async def _run(agent: Agent[Any], message: str, session: Any, stream: bool) -> None:
    if not stream:
        await agent.run(message, session=session)
        return
    response = agent.run(message, session=session, stream=True)
    async for _ in response:
        pass
    await response.get_final_response()


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_that_reuses_call_ids_is_told_what_each_tool_gave(stream: bool, client_kind: str) -> None:
    """A model that names every call ``call_0`` (each run): the earlier run's call, answered, is
    not the one the tool answers now."""
    answers = iter(["first", "second", "third"])

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return next(answers)

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user":
            return AFMessage("assistant", [Content.from_function_call("call_0", "lookup", arguments='{"q": "x"}')])
        return AFMessage("assistant", ["found"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[lookup],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        for question in ["one?", "two?", "three?"]:
            await _run(agent, question, session, stream)
        assert _results(client.calls[-1]) == ["first", "second", "third"]
        stored = [p.result for m in await memory.list_messages("c1") for p in m.parts if isinstance(p, ToolResultPart)]
        assert stored == ["first", "second", "third"]


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_thread_deleted_while_its_tool_runs_is_no_tool_failure(stream: bool, client_kind: str) -> None:
    """The user deletes the conversation while its tool runs: memory cannot store the tool's
    result, and the run fails as a deleted thread's run does; the model is never told that the
    tool, which ran, failed. The session goes on afresh."""
    box: list[Memory] = []

    @tool
    async def save_card() -> str:
        """Save the card."""
        await box[0].delete_thread("c1")
        return "saved"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "save my card":
            return AFMessage("assistant", [Content.from_function_call("s1", "save_card", arguments="{}")])
        return AFMessage("assistant", ["ok"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        box.append(memory)
        agent = Agent(client, "APP", tools=[save_card],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        with pytest.raises(ThreadNotFoundError):
            await _run(agent, "save my card", session, stream)
        assert all(r == "saved" for sent in client.calls for r in _results(sent))
        await _run(agent, "hi", session, stream)
        stored = await memory.list_messages("c1")
        assert [(m.role, m.text.strip()) for m in stored] == [("user", "hi"), ("assistant", "ok")]
