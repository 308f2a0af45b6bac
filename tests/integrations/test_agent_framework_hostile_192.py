"""Microsoft Agent Framework with ObservationalMemoryProvider, used as an app would (helper-192):
an approval given late with a chat client built without the chat-middleware layer, streaming,
several runs of one session at once, a run stopped mid-stream, the thread deleted mid-run.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolResultPart
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
