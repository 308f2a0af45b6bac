"""LangChain v1: ``create_agent`` with ObservationalMemoryMiddleware, against a local model server.

The agent is LangChain's own (``create_agent``, ``ChatOpenAI`` over real HTTP to
:class:`tests.integrations.agent_model.AgentModel`); nothing in LangChain is patched.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory, MemoryConfig, ObservationConfig
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.agent_model import AgentModel, request_text, small_memory_config
from tests.integrations.agent_model_extra import ParallelAgentModel
from tests.models.wire_server import Recorded, Reply, WireServer

pytestmark = pytest.mark.anyio

BUFFERED = MemoryConfig(observation=ObservationConfig(message_tokens=400))  # buffering on (the default)

ROOT = Path(__file__).resolve().parents[2]
CITIES = ["Oslo", "Paris", "Berlin", "Madrid", "Rome", "Lisbon"]
PREAMBLE_WORD = "observations"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 4 degrees and snow"


def chat_model(url: str) -> ChatOpenAI:
    return ChatOpenAI(model="agent-test-model", base_url=f"{url}/v1", api_key="test-key", max_retries=0)  # type: ignore[arg-type]


def user_text(turn: int, thread: str) -> str:
    if turn % 3 == 0:
        return f"[{thread} {turn}] What is the weather in {CITIES[turn % len(CITIES)]} today?"
    return f"[{thread} {turn}] I am planning a trip for my sister Anna, she likes museums number {turn}."


def chat_requests(server: WireServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


def leading_system(body: dict[str, Any]) -> list[str]:
    """The contents of a request's leading system messages (the app's prompt, then obsmem's)."""
    lead: list[str] = []
    for message in body["messages"]:
        if message["role"] not in ("system", "developer"):
            break
        lead.append(message["content"])
    return lead


async def test_sixty_turns_with_tools_are_observed_and_every_request_is_valid(
    server: tuple[WireServer, AgentModel],
) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config()) as memory:
        middleware = ObservationalMemoryMiddleware(memory, resource_id="user-1")
        agent = create_agent(
            model=chat_model(wire.url), tools=[get_weather], system_prompt="You are a travel helper.",
            middleware=[middleware], checkpointer=InMemorySaver(),
        )
        for turn in range(60):
            result = await agent.ainvoke(
                {"messages": [HumanMessage(user_text(turn, "t1"))]}, {"configurable": {"thread_id": "t1"}}
            )
            assert result["messages"][-1].text.startswith(("You said:", "The tool said:"))
        record = await memory.get_record("t1")
        stored = await memory.list_messages("t1")
        await memory.settled()

    # observations were made, and the model saw them (in the system messages after the app's prompt)
    assert record is not None and record.active_observations.strip()
    requests = chat_requests(wire)
    assert model.invalid == [] and model.answered == len(requests)
    assert model.tool_calls == 20
    with_observations = [b for b in requests if leading_system(b)[:1] == ["You are a travel helper."]
                         and len("".join(leading_system(b)[1:])) > 200]
    assert with_observations, "no request carried obsmem's observations"
    assert any("Anna" in "".join(leading_system(b)[1:]) for b in with_observations)
    # the context stays small: the last request holds far fewer messages than the history
    assert len(requests[-1]["messages"]) < len(stored) / 4
    # raw history in obsmem is complete: 60 user messages, 20 calls, 20 results, 80 answers
    assert sum(m.role == "user" for m in stored) == 60
    assert sum(len(m.tool_calls) for m in stored) == 20
    assert sum(m.role == "tool" for m in stored) == 20
    assert sum(m.role == "assistant" and bool(m.text) for m in stored) == 60
    assert [m.text for m in stored if m.role == "user"] == [user_text(t, "t1") for t in range(60)]
    # the newest input is in every request, raw
    for body in requests:
        assert "[t1 " in json.dumps(body["messages"][-1]) or body["messages"][-1]["role"] == "tool"


async def test_a_tool_call_and_its_result_stay_together_after_observation(
    server: tuple[WireServer, AgentModel],
) -> None:
    """SummarizationMiddleware can cut between an AIMessage's tool call and its ToolMessage; obsmem
    never does: in every request after observations began, each tool result follows its call."""
    wire, model = server
    async with Memory("memory://", config=small_memory_config(message_tokens=150)) as memory:
        agent = create_agent(
            model=chat_model(wire.url), tools=[get_weather],
            middleware=[ObservationalMemoryMiddleware(memory, thread_id="pairs", resource_id="u")],
        )
        for turn in range(30):  # every turn calls the tool: the cut always falls near a pair
            await agent.ainvoke({"messages": [HumanMessage(f"turn {turn}: weather in {CITIES[turn % 6]}?")]})
        await memory.settled()
        record = await memory.get_record("pairs")
    assert record is not None and record.active_observations.strip()
    requests = chat_requests(wire)
    observed = [b for b in requests if b["messages"][0]["role"] in ("system", "developer")]
    assert observed
    pairs_kept = 0
    for body in observed:
        calls = {c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []}
        results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        assert set(results) <= calls, "a tool result was sent without its call"
        pairs_kept += bool(results)
    assert pairs_kept and model.invalid == []


async def test_two_concurrent_runs_share_one_memory(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    events: list[Any] = []
    async with Memory("memory://", config=BUFFERED, on_event=events.append) as memory:  # buffers in the background
        middleware = ObservationalMemoryMiddleware(memory, resource_id="shared")
        agent = create_agent(model=chat_model(wire.url), tools=[get_weather], middleware=[middleware])

        async def talk(thread: str) -> None:
            for turn in range(20):
                await agent.ainvoke(
                    {"messages": [HumanMessage(user_text(turn, thread))]}, {"configurable": {"thread_id": thread}}
                )

        await asyncio.gather(talk("a"), talk("b"))
        await memory.settled()
        stored = {t: await memory.list_messages(t) for t in ("a", "b")}
        records = {t: await memory.get_record(t) for t in ("a", "b")}
    assert memory.background.pending == 0  # closing the Memory left no background task behind
    assert any(e.kind == "buffer-end" for e in events)  # positive control: background buffering did run
    assert model.invalid == []
    for thread, messages in stored.items():
        other = "b" if thread == "a" else "a"
        users = [m.text for m in messages if m.role == "user"]
        assert users == [user_text(t, thread) for t in range(20)]
        assert not any(f"[{other} " in m.text for m in messages)
        assert records[thread] is not None
        assert records[thread].active_observations.strip()  # type: ignore[union-attr]
    assert middleware._runs == {}  # every run ended its turn


async def test_the_middleware_needs_a_thread_id(server: tuple[WireServer, AgentModel]) -> None:
    wire, _ = server
    async with Memory("memory://") as memory:
        agent = create_agent(model=chat_model(wire.url), middleware=[ObservationalMemoryMiddleware(memory)])
        with pytest.raises(Exception, match="thread id"):
            await agent.ainvoke({"messages": [HumanMessage("hi")]})


def test_the_example_runs_ten_turns_against_the_local_server(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_agent.py"), "--base-url", f"{wire.url}/v1",
         "--model", "agent-test-model"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": "test-key"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("user: ") == 10 and done.stdout.count("agent: ") == 10
    assert "The tool said: Oslo: -2 degrees" in done.stdout  # the tool ran
    observations = done.stdout.split("observations:\n", 1)[1]
    assert observations.strip() and "(none yet)" not in observations
    assert model.invalid == [] and model.tool_calls == 3 and model.answered == 13


async def test_a_restarted_middleware_does_not_store_the_checkpointed_history_twice(
    server: tuple[WireServer, AgentModel],
) -> None:
    wire, model = server
    checkpointer = InMemorySaver()
    async with Memory("memory://", config=small_memory_config()) as memory:
        for run in range(2):  # a new middleware, as after a process restart, over the same checkpoint
            agent = create_agent(
                model=chat_model(wire.url), tools=[get_weather], checkpointer=checkpointer,
                middleware=[ObservationalMemoryMiddleware(memory, thread_id="r", resource_id="u")],
            )
            for turn in range(run * 6, run * 6 + 6):
                await agent.ainvoke({"messages": [HumanMessage(user_text(turn, "r"))]}, {"configurable": {"thread_id": "r"}})
        stored = await memory.list_messages("r")
    assert [m.text for m in stored if m.role == "user"] == [user_text(t, "r") for t in range(12)]
    assert len({m.id for m in stored}) == len(stored) == 12 + 4 + 4 + 12
    assert model.invalid == []


async def test_a_synchronous_run_is_refused_with_a_clear_error(server: tuple[WireServer, AgentModel]) -> None:
    wire, _ = server
    async with Memory("memory://") as memory:
        agent = create_agent(model=chat_model(wire.url), middleware=[ObservationalMemoryMiddleware(memory, thread_id="s")])
        with pytest.raises(Exception, match="ainvoke"):
            await asyncio.to_thread(lambda: agent.invoke({"messages": [HumanMessage("hi")]}))


async def test_streamed_runs_are_saved_and_observed(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    async with Memory("memory://", config=small_memory_config()) as memory:
        agent = create_agent(
            model=ChatOpenAI(model="agent-test-model", base_url=f"{wire.url}/v1", api_key="k", streaming=True),  # type: ignore[arg-type]
            tools=[get_weather], middleware=[ObservationalMemoryMiddleware(memory, thread_id="s", resource_id="u")],
        )
        for turn in range(30):
            tokens = [chunk.text async for chunk, _ in agent.astream(  # type: ignore[union-attr]
                {"messages": [HumanMessage(user_text(turn, "s"))]}, stream_mode="messages")]
            assert "".join(tokens).strip()
        stored = await memory.list_messages("s")
        record = await memory.get_record("s")
    assert all(r.body.get("stream") for r in wire.requests) and model.invalid == []
    assert [m.text for m in stored if m.role == "user"] == [user_text(t, "s") for t in range(30)]
    assert sum(len(m.tool_results) for m in stored) == 10
    assert record is not None and record.active_observations.strip()


async def test_a_run_that_fails_mid_way_leaves_a_valid_history_for_the_next(
    server: tuple[WireServer, AgentModel],
) -> None:
    """The model call after a tool result fails: the run raises, its turn is ended by the next run,
    and what was saved (the call and its result) stays a valid sequence for every later request."""
    wire, model = server
    failed: list[int] = []

    def flaky(request: Recorded) -> Reply:
        if request.body["messages"][-1]["role"] == "tool" and not failed:
            failed.append(len(wire.requests))
            return Reply(status=500, json={"error": {"message": "try again"}})
        return model(request)

    wire.responder = flaky
    async with Memory("memory://", config=small_memory_config()) as memory:
        middleware = ObservationalMemoryMiddleware(memory, thread_id="f", resource_id="u")
        agent = create_agent(model=chat_model(wire.url), tools=[get_weather], middleware=[middleware])
        with pytest.raises(Exception, match="try again"):
            await agent.ainvoke({"messages": [HumanMessage("What is the weather in Oslo?")]})
        assert "f" in middleware._runs  # the failed run's turn is still open
        for turn in range(1, 20):
            result = await agent.ainvoke({"messages": [HumanMessage(user_text(turn, "f"))]})
            assert result["messages"][-1].text
        stored = await memory.list_messages("f")
        record = await memory.get_record("f")
    assert failed and model.invalid == []
    assert sum(len(m.tool_calls) for m in stored) == sum(len(m.tool_results) for m in stored) == 7
    assert record is not None and record.active_observations.strip()
    assert middleware._runs == {}


async def test_parallel_tool_calls_stay_with_their_results() -> None:
    model = ParallelAgentModel()
    with WireServer() as wire:
        wire.responder = model
        async with Memory("memory://", config=small_memory_config(message_tokens=200)) as memory:
            agent = create_agent(
                model=chat_model(wire.url), tools=[get_weather],
                middleware=[ObservationalMemoryMiddleware(memory, thread_id="p", resource_id="u")],
            )
            for turn in range(24):
                await agent.ainvoke({"messages": [HumanMessage(
                    f"turn {turn}: weather in {CITIES[turn % 6]} and {CITIES[(turn + 1) % 6]}?")]})
            stored = await memory.list_messages("p")
            record = await memory.get_record("p")
        requests = chat_requests(wire)
    assert model.parallel_calls == 24 and model.invalid == []
    assert record is not None and record.active_observations.strip()
    assert sum(len(m.tool_results) for m in stored) == 48
    observed = [b for b in requests if b["messages"][0]["role"] == "system"]
    assert observed
    for body in observed:  # both results follow their calls, or neither is there
        for index, message in enumerate(body["messages"]):
            if message.get("tool_calls"):
                ids = {c["id"] for c in message["tool_calls"]}
                assert {m.get("tool_call_id") for m in body["messages"][index + 1 : index + 3]} == ids
