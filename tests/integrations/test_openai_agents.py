"""The OpenAI Agents SDK's real Runner with an obsmem Session, against a local model over real HTTP.

The agent talks to :class:`tests.integrations.agent_model.AgentModel` through the SDK's own
models (``OpenAIResponsesModel`` and ``OpenAIChatCompletionsModel`` over an ``AsyncOpenAI``
client; plain and streamed runs); obsmem observes with its offline observer. Nothing of the
framework is patched.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner, function_tool
from agents.memory import Session
from openai import AsyncOpenAI

from obsmem import Memory
from obsmem.errors import ConfigError
from obsmem.integrations.openai_agents import ObsmemSession
from tests.integrations.agent_model import (
    AgentModel,
    ToolRule,
    assert_valid_chat_sequence,
    assert_valid_responses_input,
    last_user_text,
    request_text,
    small_memory_config,
)
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio
TURNS = 60
ROOT = Path(__file__).resolve().parents[2]
RUN = RunConfig(tracing_disabled=True)  # nothing leaves the machine


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"forecast for {city}: sunny, 24 degrees"


def _agent(wire: WireServer, api: str) -> Agent[Any]:
    client = AsyncOpenAI(base_url=f"{wire.url}/v1", api_key="test-key")
    model = (
        OpenAIResponsesModel("agent-test-model", openai_client=client)
        if api == "responses"
        else OpenAIChatCompletionsModel("agent-test-model", openai_client=client)
    )
    return Agent(name="travel", instructions="You are a travel assistant.", model=model, tools=[get_weather])


def _prompt(thread: str, turn: int) -> str:
    if turn % 4 == 0:
        return f"[{thread}] What is the weather in Paris for day {turn}?"
    return f"[{thread}] I like hiking number {turn} with my dog Rex near Lyon."


async def _converse(
    agent: Agent[Any], wire: WireServer, session: ObsmemSession, turns: int, config: RunConfig = RUN
) -> list[str]:
    outputs: list[str] = []
    thread = session.session_id
    for turn in range(turns):
        prompt = _prompt(thread, turn)
        before = len(wire.requests)
        if turn % 2:
            streamed = Runner.run_streamed(agent, prompt, session=session, run_config=config)
            async for _ in streamed.stream_events():
                pass
            outputs.append(str(streamed.final_output))
        else:
            result = await Runner.run(agent, prompt, session=session, run_config=config)
            outputs.append(str(result.final_output))
        # the newest input ends the user messages of every request of this turn
        mine = [r for r in wire.requests[before:] if thread in request_text(r.body)]
        assert mine and all(last_user_text(r.body) == prompt for r in mine)
    return outputs


@pytest.mark.parametrize(
    ("api", "with_filter"), [("responses", False), ("chat", True)], ids=["responses", "chat-with-input-filter"]
)
async def test_sixty_turns_with_tools_through_the_runner(
    server: tuple[WireServer, AgentModel], api: str, with_filter: bool
) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config(buffered=api == "chat"))
    session = ObsmemSession(memory, "trip", "user-1")
    assert isinstance(session, Session)  # the SDK's protocol
    config = RunConfig(tracing_disabled=True, call_model_input_filter=session.model_input_filter if with_filter else None)
    outputs = await _converse(_agent(wire, api), wire, session, TURNS, config)

    # every request was a valid message sequence for its API (the model refuses invalid ones)
    assert model.invalid == []
    for recorded in wire.requests:
        if api == "chat":
            assert_valid_chat_sequence(recorded.body)
        else:
            assert_valid_responses_input(recorded.body)
    assert model.tool_calls == TURNS // 4

    # observations were made and the model got them (as the leading developer item); the observed
    # messages themselves were not sent again
    record = await memory.get_record("trip")
    assert record is not None and "hiking number 1 with" in record.active_observations
    last = wire.requests[-1].body
    assert "hiking number 1 with" in request_text(last)
    assert "You said: [trip] I like hiking number 1 with" not in request_text(last)
    if api == "responses":
        assert last["input"][0]["role"] == "developer" and "<observations>" in request_text({"input": last["input"][:1]})
    sizes = [len(r.body.get("messages") or r.body.get("input")) for r in wire.requests]
    assert max(sizes) < TURNS

    # the raw history is complete: every user, assistant and tool message stored once, in order
    stored = await memory.list_messages("trip")
    assert [m.text for m in stored if m.role == "user"] == [_prompt("trip", t) for t in range(TURNS)]
    assert [m.text for m in stored if m.role == "assistant" and m.text] == outputs
    calls = [c.tool_call_id for m in stored for c in m.tool_calls]
    results = [r.tool_call_id for m in stored for r in m.tool_results]
    assert calls == results == model.issued_calls
    assert len(stored) == TURNS * 2 + 2 * (TURNS // 4)

    await session.aclose()
    await memory.aclose()
    assert memory.background.pending == 0


async def test_concurrent_runs_share_one_memory(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config(buffered=True))
    alpha, beta = ObsmemSession(memory, "alpha", "user-1"), ObsmemSession(memory, "beta", "user-2")
    outputs = await asyncio.gather(
        _converse(_agent(wire, "responses"), wire, alpha, 24),
        _converse(_agent(wire, "chat"), wire, beta, 24),
    )
    assert model.invalid == []
    for recorded in wire.requests:
        text = request_text(recorded.body)
        assert not ("[alpha]" in text and "[beta]" in text)
    for session, said in zip((alpha, beta), outputs, strict=True):
        stored = await memory.list_messages(session.session_id)
        assert [m.text for m in stored if m.role == "user"] == [_prompt(session.session_id, t) for t in range(24)]
        assert [m.text for m in stored if m.role == "assistant" and m.text] == said
        assert await memory.get_record(session.session_id) is not None
    await memory.aclose()
    assert memory.background.pending == 0


async def test_session_methods_pop_clear_and_limit() -> None:
    memory = Memory("memory://")
    session = ObsmemSession(memory, "t1", "user-1")
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.add_items([{"role": "user", "content": "What is the weather in Paris?"}])
    await session.add_items([
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ])
    await session.add_items([{"type": "message", "role": "assistant", "content": "It is sunny."}])
    items = await session.get_items()
    assert [i.get("type") for i in items] == ["message", "function_call", "function_call_output", "message"]
    # a limit never keeps an output without its call
    assert [i.get("type") for i in await session.get_items(limit=2)] == ["message"]
    assert [i.get("type") for i in await session.get_items(limit=3)] == ["function_call", "function_call_output", "message"]
    popped = await session.pop_item()
    assert popped is not None and popped.get("content") == "It is sunny."
    popped = await session.pop_item()
    assert popped is not None and popped.get("type") == "function_call_output"
    assert [i.get("type") for i in await session.get_items()] == ["message"]  # its call went with it
    await session.clear_session()
    assert await session.get_items() == []
    await memory.aclose()


def test_wrong_options_are_refused() -> None:
    memory = Memory("memory://")
    with pytest.raises(ConfigError):
        ObsmemSession(memory, "", "user-1")
    with pytest.raises(ConfigError):
        ObsmemSession("memory://", "t1", "user-1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ObsmemSession(memory, "t1", "user-1", system_role="user")  # type: ignore[arg-type]


def test_the_example_runs_ten_turns_against_the_local_server(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_agent.py"), "--base-url", f"{wire.url}/v1",
         "--model", "agent-test-model"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        env={**os.environ, "OPENAI_API_KEY": "test-key"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("user: ") == 10 and done.stdout.count("agent: ") == 10
    assert "The tool said: Oslo: -2 degrees, light snow" in done.stdout
    observations = done.stdout.split("observations:\n", 1)[1]
    assert "Dana" in observations and "(none yet)" not in observations
    assert model.invalid == [] and model.tool_calls == 3 and model.answered == 13


@function_tool
def read_page(page: int) -> str:
    """Read one page of the book."""
    ending = f"next page is {page + 1}" if page < 30 else "the end"
    return f"page {page}: the hero met the baker number {page} in the village of Town{page}; {ending}"


@pytest.mark.parametrize("with_filter", [True, False], ids=["model-input-filter", "session-only"])
async def test_one_long_run_is_observed_between_its_model_calls(
    server: tuple[WireServer, AgentModel], with_filter: bool
) -> None:
    wire, model = server
    model.rules = [
        ToolRule(r"read the book", "read_page", lambda m: {"page": 1}),
        ToolRule(r"next page is (\d+)", "read_page", lambda m: {"page": int(m.group(1))}, on_results=True),
    ]
    memory = Memory("memory://", config=small_memory_config())
    session = ObsmemSession(memory, "book", "user-1")
    client = AsyncOpenAI(base_url=f"{wire.url}/v1", api_key="test-key")
    agent: Agent[Any] = Agent(
        name="reader", model=OpenAIResponsesModel("agent-test-model", openai_client=client), tools=[read_page]
    )
    config = RunConfig(tracing_disabled=True, call_model_input_filter=session.model_input_filter if with_filter else None)
    result = await Runner.run(agent, "Please read the book to me.", session=session, run_config=config, max_turns=40)

    assert model.invalid == [] and model.tool_calls == 30 and len(wire.requests) == 31
    assert str(result.final_output).startswith("The tool said: page 30:")
    stored = await memory.list_messages("book")
    calls = [c.tool_call_id for m in stored for c in m.tool_calls]
    assert calls == [r.tool_call_id for m in stored for r in m.tool_results] == model.issued_calls
    last = wire.requests[-1].body["input"]
    if with_filter:
        # each call was a turn boundary: the early pages were observed during the run and left the input
        assert len(last) < 30
        assert "Town2;" in request_text({"input": last[:1]})  # …and are in the observations item
        assert "read the book" in request_text({"input": last})  # raw, or once seen, in the observations
    else:
        assert len(last) == 61  # the whole loop: memory work waits for the next run
    # every call's newest item is the result the model has not seen yet
    for recorded, call_id in zip(wire.requests[1:], model.issued_calls, strict=True):
        newest = recorded.body["input"][-1]
        assert (newest["type"], newest["call_id"]) == ("function_call_output", call_id)
    await memory.aclose()
