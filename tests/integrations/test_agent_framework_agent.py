"""Microsoft Agent Framework: an Agent with ObservationalMemoryProvider over a local model server.

The agent is Agent Framework's own (``Agent``, ``OpenAIChatClient`` over real HTTP to
:class:`tests.integrations.agent_model.AgentModel`, the Responses API); nothing in it is patched.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, InMemoryHistoryProvider, tool
from agent_framework import Message as AFMessage
from agent_framework.openai import OpenAIChatClient, OpenAIChatCompletionClient

from obsmem import Memory, MemoryConfig, ObservationConfig
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.agent_model import AgentModel, request_text, small_memory_config
from tests.integrations.agent_model_extra import ParallelAgentModel
from tests.models.wire_server import Recorded, Reply, WireServer

pytestmark = pytest.mark.anyio

BUFFERED = MemoryConfig(observation=ObservationConfig(message_tokens=400))  # buffering on (the default)

ROOT = Path(__file__).resolve().parents[2]
CITIES = ["Oslo", "Paris", "Berlin", "Madrid", "Rome", "Lisbon"]
INSTRUCTIONS = "You are a travel helper."


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 4 degrees and snow"


def user_text(turn: int, thread: str) -> str:
    if turn % 3 == 0:
        return f"[{thread} {turn}] What is the weather in {CITIES[turn % len(CITIES)]} today?"
    return f"[{thread} {turn}] I am planning a trip for my sister Anna, she likes museums number {turn}."


def make_agent(url: str, provider: ObservationalMemoryProvider) -> Agent[Any]:
    client = OpenAIChatClient(model="agent-test-model", api_key="test-key", base_url=f"{url}/v1")
    return Agent(client, INSTRUCTIONS, tools=[get_weather], context_providers=[provider],
                 default_options={"store": False})


def function_calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") == "function_call"]


async def test_sixty_turns_with_tools_are_observed_and_every_request_is_valid(
    server: tuple[WireServer, AgentModel],
) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config()) as memory:
        provider = ObservationalMemoryProvider(memory, resource_id="user-1")
        agent = make_agent(wire.url, provider)
        session = agent.create_session(session_id="t1")
        for turn in range(60):
            response = await agent.run(user_text(turn, "t1"), session=session)
            assert response.text.startswith(("You said:", "The tool said:"))
        record = await memory.get_record("t1")
        stored = await memory.list_messages("t1")
        await memory.settled()
    assert not any(isinstance(p, InMemoryHistoryProvider) for p in agent.context_providers)  # obsmem is the history
    assert record is not None and record.active_observations.strip()
    requests = [r.body for r in wire.requests if r.path.endswith("/responses")]
    assert model.invalid == [] and model.answered == len(requests) and model.tool_calls == 20
    observed = [b for b in requests if len(b.get("instructions") or "") > len(INSTRUCTIONS) + 200]
    assert observed and any("Anna" in b["instructions"] for b in observed)
    assert all(b["instructions"].startswith(INSTRUCTIONS) for b in requests)
    # arguments go as JSON text, as the Responses API takes them (also when obsmem rebuilt them)
    assert all(isinstance(call["arguments"], str) for b in requests for call in function_calls(b))
    assert len(requests[-1]["input"]) < len(stored) / 4  # the context stays small
    # the newest input is the last message of every first request of a turn
    for turn in range(60):
        first = next(b for b in requests if user_text(turn, "t1") in request_text(b))
        assert user_text(turn, "t1") in str(first["input"][-1])
    # raw history in obsmem is complete
    assert [m.text for m in stored if m.role == "user"] == [user_text(t, "t1") for t in range(60)]
    assert sum(len(m.tool_calls) for m in stored) == 20
    assert sum(len(m.tool_results) for m in stored) == 20
    assert sum(m.role == "assistant" and bool(m.text) for m in stored) == 60
    assert provider._turns == {}  # every run ended its turn


async def test_two_concurrent_sessions_share_one_memory(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    events: list[Any] = []
    async with Memory("memory://", config=BUFFERED, on_event=events.append) as memory:  # buffers in the background
        provider = ObservationalMemoryProvider(memory, resource_id="shared")
        agent = make_agent(wire.url, provider)

        async def talk(thread: str) -> None:
            session = agent.create_session(session_id=thread)
            for turn in range(20):
                await agent.run(user_text(turn, thread), session=session)

        await asyncio.gather(talk("a"), talk("b"))
        await memory.settled()
        stored = {t: await memory.list_messages(t) for t in ("a", "b")}
        records = {t: await memory.get_record(t) for t in ("a", "b")}
    assert memory.background.pending == 0  # closing the Memory left no background task behind
    assert any(e.kind == "buffer-end" for e in events)  # positive control: background buffering did run
    assert model.invalid == []
    for thread, messages in stored.items():
        other = "b" if thread == "a" else "a"
        assert [m.text for m in messages if m.role == "user"] == [user_text(t, thread) for t in range(20)]
        assert not any(f"[{other} " in m.text for m in messages)
        record = records[thread]
        assert record is not None and record.active_observations.strip()
    assert provider._turns == {}


async def test_chat_completions_client_works_too(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config()) as memory:
        client = OpenAIChatCompletionClient(model="agent-test-model", api_key="k", base_url=f"{wire.url}/v1")
        agent = Agent(client, INSTRUCTIONS, tools=[get_weather],
                      context_providers=[ObservationalMemoryProvider(memory, thread_id="cc")])
        for turn in range(30):
            await agent.run(user_text(turn, "cc"))
        record = await memory.get_record("cc")
    requests = [r.body for r in wire.requests if r.path.endswith("/chat/completions")]
    assert len(requests) == 40 and model.invalid == []
    assert record is not None and record.active_observations.strip()
    assert any("Anna" in b["messages"][0]["content"] for b in requests if b["messages"][0]["role"] == "system"
               and len(b["messages"][0]["content"]) > 300)


def test_the_example_runs_ten_turns_against_the_local_server(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_framework_agent.py"), "--base-url", f"{wire.url}/v1",
         "--model", "agent-test-model"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": "test-key"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("user: ") == 10 and done.stdout.count("agent: ") == 10
    assert "The tool said: Oslo: -2 degrees" in done.stdout
    observations = done.stdout.split("observations:\n", 1)[1]
    assert observations.strip() and "(none yet)" not in observations
    assert model.invalid == [] and model.tool_calls == 3 and model.answered == 13


async def test_streamed_runs_are_saved_and_observed(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config()) as memory:
        agent = make_agent(wire.url, ObservationalMemoryProvider(memory, resource_id="u"))
        session = agent.create_session(session_id="s")
        answers = []
        for turn in range(30):
            stream = agent.run(user_text(turn, "s"), session=session, stream=True)
            chunks = [update.text async for update in stream]
            final = await stream.get_final_response()
            assert any(chunks) and final.text.startswith(("You said:", "The tool said:"))
            answers.append(final.text)
        stored = await memory.list_messages("s")
        record = await memory.get_record("s")
    assert all(r.body.get("stream") for r in wire.requests) and model.invalid == []
    assert [m.text for m in stored if m.role == "user"] == [user_text(t, "s") for t in range(30)]
    assert [m.text for m in stored if m.role == "assistant" and m.text] == answers
    assert sum(len(m.tool_results) for m in stored) == 10
    assert record is not None and record.active_observations.strip()


async def test_a_run_that_fails_mid_way_leaves_a_valid_history_for_the_next(
    server: tuple[WireServer, AgentModel],
) -> None:
    """The model call after a tool result fails (past the client's retries): the run raises, its
    turn is ended by the next run, and every later request is still a valid sequence."""
    wire, model = server
    failures: list[int] = []

    def flaky(request: Recorded) -> Reply:
        items = request.body.get("input") or []
        if items and items[-1].get("type") == "function_call_output" and len(failures) < 5:
            failures.append(1)
            return Reply(status=500, json={"error": {"message": "try again"}})
        return model(request)

    wire.responder = flaky
    async with Memory("memory://", config=small_memory_config()) as memory:
        provider = ObservationalMemoryProvider(memory, resource_id="u")
        agent = make_agent(wire.url, provider)
        session = agent.create_session(session_id="f")
        with pytest.raises(Exception, match="try again|500"):
            await agent.run("What is the weather in Oslo?", session=session)
        for turn in range(1, 20):
            assert (await agent.run(user_text(turn, "f"), session=session)).text
        stored = await memory.list_messages("f")
        record = await memory.get_record("f")
    assert failures and model.invalid == []
    assert [m.text for m in stored if m.role == "user"][1:] == [user_text(t, "f") for t in range(1, 20)]
    assert sum(len(m.tool_calls) for m in stored) == sum(len(m.tool_results) for m in stored)
    assert record is not None and record.active_observations.strip()
    assert provider._turns == {}


async def test_parallel_tool_calls_stay_with_their_results() -> None:
    model = ParallelAgentModel()
    with WireServer() as wire:
        wire.responder = model
        async with Memory("memory://", config=small_memory_config(message_tokens=200)) as memory:
            client = OpenAIChatCompletionClient(model="agent-test-model", api_key="k", base_url=f"{wire.url}/v1")
            agent = Agent(client, INSTRUCTIONS, tools=[get_weather],
                          context_providers=[ObservationalMemoryProvider(memory, thread_id="p")])
            for turn in range(24):
                await agent.run(f"turn {turn}: weather in {CITIES[turn % 6]} and {CITIES[(turn + 1) % 6]}?")
            stored = await memory.list_messages("p")
            record = await memory.get_record("p")
        requests = [r.body for r in wire.requests]
    assert model.parallel_calls == 24 and model.invalid == []
    assert record is not None and record.active_observations.strip()
    assert sum(len(m.tool_results) for m in stored) == 48
    observed = [b for b in requests if len(b["messages"][0]["content"]) > len(INSTRUCTIONS) + 200]
    assert observed
    for body in observed:
        for index, message in enumerate(body["messages"]):
            if message.get("tool_calls"):
                ids = {c["id"] for c in message["tool_calls"]}
                assert {m.get("tool_call_id") for m in body["messages"][index + 1 : index + 3]} == ids


async def test_messages_saved_outside_a_run_are_the_next_run_s_history(
    server: tuple[WireServer, AgentModel],
) -> None:
    wire, model = server
    async with Memory("memory://") as memory:
        provider = ObservationalMemoryProvider(memory, resource_id="u")
        assert await provider.get_messages("imported") == []
        await provider.save_messages("imported", [
            AFMessage("user", ["My name is Dana."], message_id="m1"),
            AFMessage("assistant", ["Nice to meet you, Dana."], message_id="m2"),
        ])
        assert [m.text for m in await provider.get_messages("imported")] == ["My name is Dana.", "Nice to meet you, Dana."]
        agent = make_agent(wire.url, provider)
        await agent.run("What is my name?", session=agent.create_session(session_id="imported"))
    sent = wire.requests[-1].body["input"]
    assert "My name is Dana." in str(sent[0]) and "What is my name?" in str(sent[-1])
    assert model.invalid == []
