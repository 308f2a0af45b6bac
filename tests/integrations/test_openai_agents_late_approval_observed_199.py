"""OpenAI Agents SDK: a tool approval (``needs_approval``) given after the user went on, once
obsmem had observed the waiting call (helper 199).

The run stopped for the approval; the turn's end closed the call with obsmem's "no result" answer,
and the session's later runs made observation take the call and that closing out of the
unobserved tail. Resumed from its ``RunState``, the approved tool ran and the SDK saved its output:
2b32bff's check looked for the call in the unobserved tail only and refused the output as one
answering a call the session "no longer holds (undone with pop_item, or cleared)", though the
session held it and nothing was cleared; the result of a tool that ran was lost. The output now
takes its call's place as any late result does (its closing's), and the run goes on.
"""

from __future__ import annotations

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message, function_call

from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession
from obsmem.types import ToolResultPart
from tests.integrations.test_langchain_review import small_memory_config
from tests.integrations.test_openai_agents_cleared_approval_195 import CONFIG, approved, note

pytestmark = pytest.mark.anyio

WORDS = "words " * 30


async def test_a_late_approval_of_an_observed_call_stores_the_tools_result() -> None:
    async with Memory("memory://", config=small_memory_config(60)) as memory:
        session = ObsmemSession(memory, "t", "u")
        model = ScriptedModel([
            [function_call("note", {"text": "tulipsun"}, call_id="c1")],
            *[[assistant_message(f"answer {i} {WORDS}")] for i in range(6)],
            [assistant_message("noted it")],
        ])
        agent = Agent(name="notes", model=model, tools=[note])
        result = await Runner.run(agent, "my secret is tulipsun, note it", session=session, run_config=CONFIG)
        saved = result.to_state().to_string()
        for i in range(6):
            await Runner.run(agent, f"question {i} {WORDS}", session=session, run_config=CONFIG)
        tail = (await memory.get_context("t")).raw_messages
        assert not any(c.tool_call_id == "c1" for m in tail for c in m.tool_calls)  # observed by now

        result = await Runner.run(agent, await approved(agent, saved), session=session, run_config=CONFIG)
        assert result.final_output == "noted it"
        stored = await memory.list_messages("t")
    results = [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart) and p.tool_call_id == "c1"]
    assert results == ["noted tulipsun"], results
