"""pydantic-ai's real Agent runner with obsmem's capability, against a local model over real HTTP.

The agent talks to :class:`tests.integrations.agent_model.AgentModel` through pydantic-ai's own
OpenAI models (Chat Completions and Responses, plain runs and streamed runs); obsmem observes with
its offline observer. Nothing of the framework is patched.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai import messages as pai
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from obsmem import Memory
from obsmem.errors import ConfigError
from obsmem.integrations.pydantic_ai import IDS_KEY, ObservationalMemory, from_pydantic_ai
from tests.integrations.agent_model import (
    AgentModel,
    ToolRule,
    assert_valid_chat_sequence,
    assert_valid_responses_input,
    last_user_text,
    request_text,
    small_memory_config,
    weather_rule,
)
from tests.models.wire_server import WireServer

TURNS = 60
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[tuple[WireServer, AgentModel]]:
    with WireServer() as wire:
        model = AgentModel(rules=[weather_rule(), ToolRule(r"which conversations", "recall", lambda m: {"mode": "threads"})])
        wire.responder = model
        yield wire, model


def _agent(wire: WireServer, memory: Memory, api: str, **options: Any) -> Agent[None, str]:
    provider = OpenAIProvider(base_url=f"{wire.url}/v1", api_key="test-key")
    model = (
        OpenAIChatModel("agent-test-model", provider=provider)
        if api == "chat"
        else OpenAIResponsesModel("agent-test-model", provider=provider)
    )
    agent: Agent[None, str] = Agent(
        model, instructions="You are a travel assistant.",
        capabilities=[ObservationalMemory(memory, resource_id="user-1", **options)],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"forecast for {city}: sunny, 24 degrees"

    return agent


def _prompt(thread: str, turn: int) -> str:
    if turn % 4 == 0:
        return f"[{thread}] What is the weather in Paris for day {turn}?"
    return f"[{thread}] I like hiking number {turn} with my dog Rex near Lyon."


def _validate(body: dict[str, Any]) -> None:
    if "messages" in body:
        assert_valid_chat_sequence(body)
    else:
        assert_valid_responses_input(body)


async def _converse(
    agent: Agent[None, str], wire: WireServer, thread: str, turns: int, *, stream: bool, history: bool
) -> tuple[list[str], list[pai.ModelMessage]]:
    """Run ``turns`` turns; return the outputs and every message the runs made."""
    outputs: list[str] = []
    made: list[pai.ModelMessage] = []
    passed: list[pai.ModelMessage] = []
    for turn in range(turns):
        prompt = _prompt(thread, turn)
        before = len(wire.requests)
        if stream and turn % 2:
            async with agent.run_stream(prompt, conversation_id=thread, message_history=passed) as streamed:
                outputs.append(await streamed.get_output())
            new, everything = streamed.new_messages(), streamed.all_messages()
        else:
            result = await agent.run(prompt, conversation_id=thread, message_history=passed)
            outputs.append(result.output)
            new, everything = result.new_messages(), result.all_messages()
        made.extend(new)
        passed = everything if history else []
        # the newest input is what every request of this turn ends its user messages with
        mine = [r for r in wire.requests[before:] if thread in request_text(r.body)]
        assert mine and all(last_user_text(r.body) == prompt for r in mine)
    return outputs, made


@pytest.mark.parametrize(
    ("api", "stream", "history"),
    [("chat", False, False), ("responses", True, True)],
    ids=["chat-completions", "responses-streamed-with-history"],
)
async def test_sixty_turns_with_tools_through_the_agent_runner(
    server: tuple[WireServer, AgentModel], api: str, stream: bool, history: bool
) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config(buffered=stream))
    agent = _agent(wire, memory, api)
    outputs, made = await _converse(agent, wire, "trip", TURNS, stream=stream, history=history)

    # every request was a valid message sequence for its API (the model refuses invalid ones)
    assert model.invalid == []
    for recorded in wire.requests:
        _validate(recorded.body)
    assert model.tool_calls == TURNS // 4

    # observations were made, and the model got them while the observed messages were pruned
    record = await memory.get_record("trip")
    assert record is not None and "hiking number 1 with" in record.active_observations
    last = request_text(wire.requests[-1].body)
    assert "hiking number 1 with" in last  # from the observations
    assert "You said: [trip] I like hiking number 1 with" not in last  # the raw reply is pruned
    sizes = [len(r.body.get("messages") or r.body.get("input")) for r in wire.requests]
    assert max(sizes) < TURNS  # far fewer than the 60 turns' messages

    # the raw history is complete: every user, assistant and tool message stored once, in order
    stored = await memory.list_messages("trip")
    assert [m.text for m in stored if m.role == "user"] == [_prompt("trip", t) for t in range(TURNS)]
    assert [m.text for m in stored if m.role == "assistant" and m.text] == outputs
    calls = [c.tool_call_id for m in stored for c in m.tool_calls]
    results = [r.tool_call_id for m in stored for r in m.tool_results]
    assert calls == results == model.issued_calls
    assert len(stored) == len(from_pydantic_ai(made))  # each message the runs made, stored once
    tagged = [i for message in made for i in (message.metadata or {}).get(IDS_KEY, [])]
    assert len(set(tagged)) == len(tagged) and set(tagged) <= {m.id for m in stored}
    if not stream:
        assert len(tagged) == len(stored)  # (a streamed run hands back its own untagged copy of the answer)

    await memory.aclose()
    assert memory.background.pending == 0


async def test_concurrent_runs_share_one_memory(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config(buffered=True))
    agent = _agent(wire, memory, "chat")
    (outputs_a, _), (outputs_b, _) = await asyncio.gather(
        _converse(agent, wire, "alpha", 24, stream=False, history=False),
        _converse(agent, wire, "beta", 24, stream=True, history=True),
    )
    assert model.invalid == []
    for recorded in wire.requests:
        text = request_text(recorded.body)
        assert not ("[alpha]" in text and "[beta]" in text)  # no run saw the other's conversation
    for thread, outputs in (("alpha", outputs_a), ("beta", outputs_b)):
        stored = await memory.list_messages(thread)
        assert [m.text for m in stored if m.role == "user"] == [_prompt(thread, t) for t in range(24)]
        assert [m.text for m in stored if m.role == "assistant" and m.text] == outputs
        assert await memory.get_record(thread) is not None
    await memory.aclose()
    assert memory.background.pending == 0


async def test_the_recall_tool_is_offered_and_answered(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config(retrieval=True))
    agent = _agent(wire, memory, "chat")
    await agent.run("Hello, I am planning a trip to Lyon.", conversation_id="trip")
    result = await agent.run("which conversations do we have?", conversation_id="trip")
    assert model.invalid == []
    offered = [t["function"]["name"] for t in wire.requests[-1].body["tools"]]
    assert sorted(offered) == ["get_weather", "recall"]
    assert result.output.startswith("The tool said:") and "trip" in result.output
    await memory.aclose()


async def test_a_failed_run_keeps_its_input_and_ends_its_turn(server: tuple[WireServer, AgentModel]) -> None:
    wire, _ = server
    memory = Memory("memory://", config=small_memory_config())
    agent = _agent(wire, memory, "chat")

    @agent.tool_plain
    def book_hotel(city: str) -> str:
        raise RuntimeError("the booking service is down")

    model = wire.responder
    assert isinstance(model, AgentModel)
    model.rules = [ToolRule(r"book a hotel in ([A-Z][a-z]+)", "book_hotel", lambda m: {"city": m.group(1)})]
    with pytest.raises(RuntimeError, match="booking service"):
        await agent.run("Please book a hotel in Lyon", conversation_id="trip")
    after = await agent.run("Never mind, thanks.", conversation_id="trip")
    assert after.output == "You said: Never mind, thanks."
    stored = await memory.list_messages("trip")
    assert [m.text for m in stored if m.role == "user"] == ["Please book a hotel in Lyon", "Never mind, thanks."]
    # the unanswered call was never sent again: every request stayed valid
    assert model.invalid == []
    await memory.aclose()


def test_a_missing_thread_or_wrong_options_are_refused() -> None:
    memory = Memory("memory://")
    with pytest.raises(ConfigError):
        ObservationalMemory(memory, resource_id="")
    with pytest.raises(ConfigError):
        ObservationalMemory(memory, resource_id="u1", recall=True)  # retrieval is off
    with pytest.raises(ConfigError):
        ObservationalMemory("memory://", resource_id="u1")  # type: ignore[arg-type]


def test_importing_obsmem_imports_no_framework() -> None:
    code = (
        "import sys, obsmem, obsmem.integrations\n"
        "frameworks = ('pydantic_ai', 'agents', 'langchain', 'langchain_core', 'langgraph', 'agent_framework')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in frameworks))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_example_runs_ten_turns_against_the_local_server(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pydantic_ai_agent.py"), "--base-url", f"{wire.url}/v1",
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


async def test_system_prompts_stay_first_when_their_request_is_observed(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config())
    provider = OpenAIProvider(base_url=f"{wire.url}/v1", api_key="test-key")
    agent: Agent[None, str] = Agent(
        OpenAIChatModel("agent-test-model", provider=provider), system_prompt="Answer as a travel agent.",
        capabilities=[ObservationalMemory(memory, resource_id="user-1", thread_id="trip")],
    )
    history: list[pai.ModelMessage] = []
    for turn in range(30):
        result = await agent.run(_prompt("trip", turn), message_history=history)
        history = result.all_messages()
    assert (await memory.get_record("trip")) is not None
    assert model.invalid == []
    for recorded in wire.requests:
        first = recorded.body["messages"][0]
        assert (first["role"], first["content"]) == ("system", "Answer as a travel agent.")
    # the first user message was observed, so it is no longer sent raw
    assert _prompt("trip", 1) not in [m.get("content") for m in wire.requests[-1].body["messages"]]
    await memory.aclose()


async def test_an_output_retry_is_sent_saved_and_answered(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    memory = Memory("memory://", config=small_memory_config())
    agent = _agent(wire, memory, "chat")
    answers: list[str] = []

    @agent.output_validator
    def once_more(output: str) -> str:
        answers.append(output)
        if len(answers) == 1:
            raise ModelRetry("Please answer again, in other words.")
        return output

    result = await agent.run("Hello there", conversation_id="trip")
    assert model.invalid == [] and len(wire.requests) == 2
    # the retry feedback (pydantic-ai's own part kind) is the newest input of the second request
    assert "Please answer again, in other words." in last_user_text(wire.requests[1].body)
    stored = await memory.list_messages("trip")
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2].text == "Please answer again, in other words."
    assert stored[3].text == result.output
    await memory.aclose()


async def test_one_long_run_is_observed_between_its_model_requests(server: tuple[WireServer, AgentModel]) -> None:
    wire, model = server
    model.rules = [
        ToolRule(r"read the book", "read_page", lambda m: {"page": 1}),
        ToolRule(r"next page is (\d+)", "read_page", lambda m: {"page": int(m.group(1))}, on_results=True),
    ]
    memory = Memory("memory://", config=small_memory_config())
    agent = _agent(wire, memory, "responses")

    @agent.tool_plain
    def read_page(page: int) -> str:
        """Read one page of the book."""
        ending = f"next page is {page + 1}" if page < 30 else "the end"
        return f"page {page}: the hero met the baker number {page} in the village of Town{page}; {ending}"

    result = await agent.run("Please read the book to me.", conversation_id="book")
    assert model.invalid == [] and model.tool_calls == 30 and len(wire.requests) == 31
    assert result.output.startswith("The tool said: page 30:")
    # each request was a step boundary: early pages were observed during the run and left the input
    last = wire.requests[-1].body
    assert len(last["input"]) < 30 and "Town2;" in last["instructions"]
    for recorded, call_id in zip(wire.requests[1:], model.issued_calls, strict=True):
        newest = recorded.body["input"][-1]  # the result the model has not seen yet is always sent
        assert (newest["type"], newest["call_id"]) == ("function_call_output", call_id)
    stored = await memory.list_messages("book")
    assert [c.tool_call_id for m in stored for c in m.tool_calls] == model.issued_calls
    assert [r.tool_call_id for m in stored for r in m.tool_results] == model.issued_calls
    await memory.aclose()
