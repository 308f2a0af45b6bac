"""pydantic-ai with ``message_history``: a value ``memory.forget`` removed is neither sent again
nor stored again from the history the app passes back (helper-175).

The capability sends a history message as the run has it when obsmem holds it unobserved, and
saves a history message whose obsmem ids are stored nowhere. After ``forget`` (a user message
holding the value deleted, a tool result rewritten to ``"[forgotten]"``) an app passing
``result.all_messages()`` back, as pydantic-ai's docs do, had the tool result sent with the
value, and the deleted message stored again, at the end of the thread, and sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory
from tests.integrations.agent_model import AgentModel, request_text, small_memory_config, weather_rule
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

SECRET = "4242-9191"


@pytest.fixture
def server() -> Iterator[tuple[WireServer, AgentModel]]:
    with WireServer() as wire:
        model = AgentModel(rules=[weather_rule()])
        wire.responder = model
        yield wire, model


async def test_a_forgotten_value_in_the_history_passed_back_is_not_sent_or_stored_again(
    server: tuple[WireServer, AgentModel],
) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config(message_tokens=100_000)) as memory:
        provider = OpenAIProvider(base_url=f"{wire.url}/v1", api_key="test-key")
        agent: Agent[None, str] = Agent(
            OpenAIChatModel("agent-test-model", provider=provider), instructions="You are a travel assistant.",
            capabilities=[ObservationalMemory(memory, resource_id="u1")],
        )

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """The weather in a city."""
            return f"{city}: sunny. Your door code is {SECRET}."

        history: list[pai.ModelMessage] = []
        for question in (f"My PIN is {SECRET}.", "What is the weather in Paris?"):
            result = await agent.run(question, conversation_id="t1", message_history=history)
            history = result.all_messages()
        assert SECRET in request_text(wire.requests[-1].body)  # positive control

        await memory.forget(SECRET, thread_id="t1")
        before = len(wire.requests)
        for question in ("Thanks!", "Anything else?"):
            result = await agent.run(question, conversation_id="t1", message_history=history)
            assert result.output == f"You said: {question}"
            history = result.all_messages()
        stored = await memory.list_messages("t1")

    sent = [request_text(r.body) for r in wire.requests[before:]]
    # before: the tool result went with the value, and the deleted question came back
    assert sent and all(SECRET not in text for text in sent)
    assert all("[forgotten]" in text for text in sent)  # the tool result stays, rewritten
    assert model.invalid == []
    assert not any(SECRET in json.dumps(m.model_dump(mode="json")) for m in stored)
    assert [m.text for m in stored if m.role == "user"] == ["What is the weather in Paris?", "Thanks!", "Anything else?"]
