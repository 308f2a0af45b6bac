"""The OpenAI Agents SDK's Runner over an ObsmemSession, with the SDK's scripted model.

``agents.testing.ScriptedModel`` is the SDK's own offline model; everything else (the Runner, the
session protocol, tool execution) is the SDK's. What the model received and what obsmem stored
are checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.testing.model import ModelStep

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio

RUN = RunConfig(tracing_disabled=True)
QUIET = MemoryConfig(  # nothing is observed in these short conversations: the raw tail is what is sent
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)


def scripted(responder: Callable[[Any], list[Any]], calls: list[list[dict[str, Any]]]) -> ScriptedModel:
    def respond(call: Any) -> list[Any]:
        calls.append([dict(i) for i in call.input] if isinstance(call.input, list) else call.input)
        return responder(call)

    return ScriptedModel([ModelStep.respond(respond) for _ in range(50)])


def orphans(items: list[Any]) -> set[Any]:
    calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    return calls ^ outputs


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: snow"


# -- 1. item ids are not obsmem's ids -----------------------------------------------------------


async def test_repeated_item_ids_keep_every_item_in_every_session() -> None:
    """The model gives every answer the id ``msg_1`` and every call the item id ``fc_1``, in two
    users' sessions: each is its own message, in order."""
    calls: list[list[dict[str, Any]]] = []

    def responder(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("role") == "user" and "weather" in str(last.get("content")):
            return [function_call("weather", {"city": "Oslo"}, call_id=f"c{len(calls)}", item_id="fc_1")]
        return [assistant_message(f"answer {len(calls)}", item_id="msg_1")]

    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(name="a", instructions="x", model=scripted(responder, calls), tools=[weather])
        for user in ("alice", "bob"):
            session = ObsmemSession(memory, session_id=f"t-{user}", resource_id=user)
            for question in ("hello", "weather?", "thanks"):
                await Runner.run(agent, f"{user}: {question}", session=session, run_config=RUN)
        stored = {u: await memory.list_messages(f"t-{u}") for u in ("alice", "bob")}
    for user, messages in stored.items():
        shape = [(m.role, "call" if m.tool_calls else "result" if m.tool_results else m.text)
                 for m in messages]
        assert [s[0] for s in shape] == ["user", "assistant", "user", "assistant", "tool", "assistant",
                                         "user", "assistant"]
        assert [text for role, text in shape if role == "user"] == [f"{user}: hello", f"{user}: weather?",
                                                                    f"{user}: thanks"]
    last = calls[-1]
    assert [i.get("id") for i in last if i.get("role") == "assistant"] == ["msg_1"] * 2
    assert [i.get("id") for i in last if i.get("type") == "function_call"] == ["fc_1"]
    assert [i.get("content") for i in last if i.get("role") == "user"][-1] == "bob: thanks"
    assert orphans(last) == set()


# -- 4. input content the Responses converter does not take ------------------------------------

FILE_BY_ID = {"type": "input_file", "file_id": "file-abc123"}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
IMAGE_BY_ID = {"type": "input_image", "file_id": "file-img9", "detail": "high"}


async def test_file_ids_audio_and_image_ids_are_stored_and_sent_again() -> None:
    calls: list[list[dict[str, Any]]] = []
    content = [{"type": "input_text", "text": "look at these"}, FILE_BY_ID, AUDIO, IMAGE_BY_ID]
    async with Memory("memory://", config=QUIET) as memory:
        session = ObsmemSession(memory, session_id="c1", resource_id="u")
        agent = Agent(name="a", instructions="x", model=scripted(lambda c: [assistant_message("ok")], calls))
        given: Any = [{"role": "user", "content": content}]
        first = await Runner.run(agent, given, session=session, run_config=RUN)
        second = await Runner.run(agent, "what was in them?", session=session, run_config=RUN)
        stored = await memory.list_messages("c1")
        items = [dict(i) for i in await session.get_items()]
    assert (first.final_output, second.final_output) == ("ok", "ok")
    sent_first = [i for i in calls[0] if i.get("role") == "user"]
    assert sent_first[-1]["content"] == content
    sent_again = [i for i in calls[1] if i.get("role") == "user"]
    assert sent_again[0]["content"] == content  # the same parts, as the SDK took them
    assert [i for i in items if i.get("role") == "user"][0]["content"] == content
    # obsmem keeps a text for each (what an observer reads), and the user's own text
    assert stored[0].role == "user" and "look at these" in stored[0].text
    assert all(name in stored[0].text for name in ("file-abc123", "input_audio", "file-img9"))
    assert json.dumps(calls[1]).count("UklGRg==") == 1


# -- 5. pop_item keeps calls with their results --------------------------------------------------


async def test_pop_item_never_leaves_a_call_without_its_result() -> None:
    calls: list[list[dict[str, Any]]] = []

    def responder(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("role") == "user" and "weather" in str(last.get("content")):
            return [function_call("weather", {"city": "Oslo"}, call_id=f"call{len(calls)}")]
        return [assistant_message("done", item_id=f"m{len(calls)}")]

    async with Memory("memory://", config=QUIET) as memory:
        session = ObsmemSession(memory, session_id="c1", resource_id="u")
        agent = Agent(name="a", instructions="x", model=scripted(responder, calls), tools=[weather])
        await Runner.run(agent, "weather in Oslo?", session=session, run_config=RUN)
        answer = await session.pop_item()
        output = await session.pop_item()
        after = await session.get_items()
        stored_after = await memory.list_messages("c1")
        result = await Runner.run(agent, "thanks", session=session, run_config=RUN)
    assert answer is not None and answer.get("role") == "assistant"
    assert output is not None and output.get("type") == "function_call_output"
    assert [(i.get("type", "message"), i.get("role")) for i in after] == [("message", "user")]
    assert orphans(after) == set()
    assert [m.role for m in stored_after] == ["user"]
    assert result.final_output == "done" and orphans(calls[-1]) == set()


async def test_popping_a_call_takes_its_result_and_keeps_the_others() -> None:
    """Parallel calls: popping one call's result takes that call too; the other pair stays."""
    calls: list[list[dict[str, Any]]] = []

    def responder(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("role") == "user" and "weather" in str(last.get("content")):
            return [function_call("weather", {"city": "Oslo"}, call_id="a1"),
                    function_call("weather", {"city": "Bergen"}, call_id="b2")]
        return [assistant_message("done", item_id=f"m{len(calls)}")]

    async with Memory("memory://", config=QUIET) as memory:
        session = ObsmemSession(memory, session_id="c1", resource_id="u")
        agent = Agent(name="a", instructions="x", model=scripted(responder, calls), tools=[weather])
        await Runner.run(agent, "weather in Oslo and Bergen?", session=session, run_config=RUN)
        popped = [await session.pop_item() for _ in range(2)]
        after = await session.get_items()
        await Runner.run(agent, "thanks", session=session, run_config=RUN)
    assert [p.get("type", "message") for p in popped if p] == ["message", "function_call_output"]
    assert orphans(after) == set()
    kept = [i.get("call_id") for i in after if i.get("type") == "function_call"]
    assert len(kept) == 1 and kept[0] != popped[1].get("call_id")  # type: ignore[union-attr]
    assert orphans(calls[-1]) == set()
