"""Microsoft Agent Framework: two runs of one thread at once (the user sent a second message
before the first was answered) with a model server that numbers each response's calls from
call_0 (many local servers do). Since c3b43a1 each result is stored as its tool returns, so the
thread holds a step whose other calls still run when the other run goes on.

Before (found by helper 204, fixed by helper 212 in obsmem.turn): the first run's end kept the
second run's 'call_1' open by its bare id as if it were its own and failed with
InvalidInputError ("comes while tool calls ['call_1'] still wait for their results"); with its
results stored one by one, its call_1 result answered the other run's waiting call_1 instead
(the two results swapped)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory, Message
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_review import QUIET
from tests.integrity.test_concurrent_reused_call_ids_212 import placed, refusals

pytestmark = pytest.mark.anyio


def af_refusals(sent: Sequence[AFMessage]) -> list[str]:
    """What a provider refuses in the messages a model call got: a function result that answers
    no call of the assistant message before it, a call left without its result."""
    bad: list[str] = []
    waiting: set[str] = set()
    for i, message in enumerate(sent):
        results = [c.call_id for c in message.contents if c.type == "function_result"]
        if message.role == "tool":
            for call_id in results:
                if call_id not in waiting:
                    bad.append(f"{i}: result for {call_id!r}, which is not waiting")
                waiting.discard(call_id)
            continue
        if waiting:
            bad.append(f"{i} ({message.role}) while {sorted(waiting)} wait")
        waiting = {c.call_id for c in message.contents if c.type == "function_call"}
    return bad


async def two_runs(release: list[str], *, stream: bool) -> tuple[list[list[AFMessage]], list[Message]]:
    """Run A ("A?") and run B ("B?") of session c1, each calling look twice (call_0, call_1);
    ``release``: the order the four tools return in ("A0", "B1", ...), then each run ends.
    Returns what each model call got and the thread as stored."""
    gates = {f"{run}{i}": asyncio.Event() for run in "AB" for i in range(2)}
    started = {name: asyncio.Event() for name in gates}
    seen: list[list[AFMessage]] = []

    @tool
    async def look(run: str, i: int) -> str:
        """Look."""
        started[f"{run}{i}"].set()
        await gates[f"{run}{i}"].wait()
        return f"{run}{i}"

    async def model(sent: list[AFMessage]) -> AFMessage:
        seen.append(list(sent))
        last = sent[-1]
        if last.role == "user" and last.text in ("A?", "B?"):
            run = last.text[0]
            return AFMessage("assistant", [Content.from_function_call(
                f"call_{i}", "look", arguments=json.dumps({"run": run, "i": i})) for i in range(2)])
        return AFMessage("assistant", ["done"])

    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(STREAMS["chat-middleware"](model), "APP", tools=[look],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        a = asyncio.create_task(_run(agent, "A?", session, stream))
        await asyncio.wait_for(started["A1"].wait(), 5)
        b = asyncio.create_task(_run(agent, "B?", session, stream))
        await asyncio.wait_for(started["B1"].wait(), 5)
        runs = {"A": a, "B": b}
        for name in release:
            gates[name].set()
            await asyncio.sleep(0.05)  # its result stored as it returns
            if all(gates[f"{name[0]}{i}"].is_set() for i in range(2)):
                await asyncio.wait_for(runs[name[0]], 5)
        stored = await memory.list_messages("c1")
    return seen, list(stored)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("release", [
    ["B0", "A0", "A1", "B1"],  # the report's order: A's results while B's call_1 runs, then A ends
    ["B0", "A1", "A0", "B1"],  # A's call_1 result alone while B's call_1 waits
    ["A0", "B0", "A1", "B1"],
    ["B0", "B1", "A1", "A0"],
], ids=["report", "a1-first", "a0-first", "b-first"])  # fmt: skip
async def test_two_runs_at_once_with_reused_call_ids_both_end(release: list[str], stream: bool) -> None:
    seen, stored = await two_runs(release, stream=stream)
    assert refusals(stored) == []
    assert placed(stored) == {run: {"call_0": f"{run}0", "call_1": f"{run}1"} for run in "AB"}
    for sent in seen:
        assert af_refusals(sent) == []
