"""Microsoft Agent Framework: a tool that needs the user (``UserInputRequiredException``: a
sub-agent run as a tool whose MCP server asks for OAuth consent) called in parallel with a tool
that returns, as an app meets it (helper 214).
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Agent, Content, UserInputRequiredException, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import TextPart, ToolCallPart, ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_consent_request_beside_a_tool_that_returned_ends_the_run_with_the_request(
    client_kind: str, stream: bool
) -> None:
    """The run ends asking the user for consent (what Agent Framework gives), the tool that ran
    is stored with its result, the model's text once, and the next run's request is valid."""
    sent_to: list[str] = []

    @tool
    async def calendar(day: str) -> str:
        """Reads the calendar (through a sub-agent that needs the user's consent)."""
        raise UserInputRequiredException([Content.from_oauth_consent_request(consent_link="https://login.example/c")])

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent_to.append(to)
        return f"sent to {to}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "go":
            return AFMessage("assistant", [
                Content.from_text("Let me check."),
                Content.from_function_call("a", "calendar", arguments='{"day": "monday"}'),
                Content.from_function_call("b", "send_email", arguments='{"to": "bob"}'),
            ])
        return AFMessage("assistant", [f"done {len(sent)}"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[calendar, send_email],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        response: Any = await _run(agent, "go", session, stream)
        assert [r.type for r in response.user_input_requests] == ["oauth_consent_request"]
        assert sent_to == ["bob"]
        await _run(agent, "never mind", session, stream)
        assert _problems(client.calls[-1]) == []
        stored = await memory.list_messages("c1")
        texts = [p.text for m in stored for p in m.parts if isinstance(p, TextPart)]
        assert [t.strip() for t in texts].count("Let me check.") == 1, texts
        assert sorted(p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)) == ["a", "b"]
        assert "sent to bob" in [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart)]
