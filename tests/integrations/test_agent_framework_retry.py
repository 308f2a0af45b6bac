"""Microsoft Agent Framework: a run that failed at its model call (the model server answered
400), run again with the same question in the same session. The provider had saved the failed
run's question (a failed call leaves its messages pending, as it should), and the rerun saved it
again: the thread held the question twice and the model got it twice, where Agent Framework's own
``InMemoryHistoryProvider`` sends it once (it saves a run's input only after the run)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from agent_framework import Agent
from agent_framework.exceptions import ChatClientException
from agent_framework.openai import OpenAIChatClient

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.agent_model import AgentModel
from tests.models.wire_server import Recorded, Reply, WireServer

pytestmark = pytest.mark.anyio


class Flaky:
    def __init__(self) -> None:
        self.model = AgentModel()
        self.down = False
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Recorded) -> Reply:
        self.bodies.append(request.body)
        if self.down:
            return Reply(status=400, json={"error": {"message": "bad request", "type": "invalid_request_error"}})
        return self.model(request)


@pytest.fixture
def server() -> Iterator[tuple[WireServer, Flaky]]:
    flaky = Flaky()
    with WireServer() as wire:
        wire.responder = flaky
        yield wire, flaky


def helper_agent(wire: WireServer, memory: Memory) -> Agent[Any]:
    """An agent whose history is obsmem's, over ``wire``'s OpenAI Responses API."""
    client = OpenAIChatClient(model="m", api_key="k", base_url=f"{wire.url}/v1")
    return Agent(client, "You help.", context_providers=[ObservationalMemoryProvider(memory, resource_id="u")],
                 default_options={"store": False})  # fmt: skip


def _questions(body: dict[str, Any]) -> list[str]:
    return [c["text"] for item in body["input"] if item.get("role") == "user" for c in item["content"]]


async def test_a_question_asked_again_after_a_failed_run_is_stored_and_sent_once(server: tuple[WireServer, Flaky]) -> None:
    wire, flaky = server
    async with Memory("memory://") as memory:
        agent = helper_agent(wire, memory)
        session = agent.create_session(session_id="af-r1")
        await agent.run("Where does Rex walk?", session=session)
        flaky.down = True
        with pytest.raises(ChatClientException):
            await agent.run("What does he eat?", session=session)
        assert [m.text for m in await memory.list_messages("af-r1")][-1] == "What does he eat?"  # kept
        flaky.down = False

        await agent.run("What does he eat?", session=session)

        assert _questions(flaky.bodies[-1]) == ["Where does Rex walk?", "What does he eat?"], json.dumps(flaky.bodies[-1])
        assert [(m.role, m.text) for m in await memory.list_messages("af-r1")] == [
            ("user", "Where does Rex walk?"), ("assistant", "You said: Where does Rex walk?"),
            ("user", "What does he eat?"), ("assistant", "You said: What does he eat?"),
        ]


async def test_the_same_question_after_an_answer_is_a_new_message(server: tuple[WireServer, Flaky]) -> None:
    wire, flaky = server
    async with Memory("memory://") as memory:
        agent = helper_agent(wire, memory)
        session = agent.create_session(session_id="af-r2")
        await agent.run("Say it again?", session=session)
        await agent.run("Say it again?", session=session)
        assert _questions(flaky.bodies[-1]) == ["Say it again?", "Say it again?"]
        assert [m.text for m in await memory.list_messages("af-r2") if m.role == "user"] == ["Say it again?"] * 2
