"""Microsoft Agent Framework: a model server that numbers the calls of each response from zero
(``call_0``, ``call_1`` in every round of the tool loop, as some OpenAI-compatible servers do)
(helper-204). Each round's calls and results are stored, and later runs are told all of them."""

from __future__ import annotations

import json

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


@tool
def page(n: int) -> str:
    """Read a page of the report."""
    return f"page {n} text"


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("width", [1, 2])
async def test_every_round_of_a_run_that_reuses_call_ids_is_kept(width: int, stream: bool, client_kind: str) -> None:
    async def model(sent: list[AFMessage]) -> AFMessage:
        asked = max(i for i, m in enumerate(sent) if m.role == "user" and m.text)
        rounds = sum(1 for m in sent[asked:] if any(c.type == "function_call" for c in m.contents))
        if sent[asked].text == "read the report" and rounds < 2:
            return AFMessage("assistant", [Content.from_text(f"Reading part {rounds}."), *[
                Content.from_function_call(f"call_{i}", "page", arguments=json.dumps({"n": rounds * width + i}))
                for i in range(width)]])
        return AFMessage("assistant", [f"done after {len(sent)} messages"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[page],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        await _run(agent, "read the report", session, stream)
        told = _results(client.calls[-1])
        assert told == [f"page {n} text" for n in range(2 * width)]
        await _run(agent, "summarise it", session, stream)
        assert _results(client.calls[-1]) == told
        assert [p for p in _problems(client.calls[-1]) if "twice" not in p] == []  # (the rounds reuse the ids)
        stored = [p.result for m in await memory.list_messages("c1") for p in m.parts if isinstance(p, ToolResultPart)]
        assert sorted(stored, key=str) == told
