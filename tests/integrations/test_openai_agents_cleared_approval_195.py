"""OpenAI Agents SDK: a run stopped for a tool's approval (``needs_approval``), its session
cleared (``clear_session``) or its pending call undone (``pop_item``) while it waited, then
resumed from its ``RunState`` (helper 195).

The approved tool runs and the SDK saves its output: the output answers a call the session no
longer holds, and ``add_items`` failed with a converter's message ("no earlier tool call has id
'c1', so the tool's name is unknown; include the assistant message ...") that says nothing of the
clear. Now the resume fails with obsmem's own error (``InvalidInputError``) naming the session and
the call, and saying the run is over. Nothing is stored and the model is not called again; the
session then goes on with a new run."""

from __future__ import annotations

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from obsmem import Memory
from obsmem.errors import InvalidInputError
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio

CONFIG = RunConfig(tracing_disabled=True)


@function_tool(needs_approval=True)
def note(text: str) -> str:
    """Save a note (asks for approval)."""
    return f"noted {text}"


def scripted() -> ScriptedModel:
    return ScriptedModel([
        [function_call("note", {"text": "tulipsun"}, call_id="c1")],
        [assistant_message("noted it")],
        [assistant_message("a fresh answer")],
    ])


async def stopped(session: ObsmemSession, model: ScriptedModel) -> tuple[Agent, str]:
    agent = Agent(name="notes", model=model, tools=[note])
    result = await Runner.run(agent, "my secret is tulipsun, note it", session=session, run_config=CONFIG)
    assert len(result.interruptions) == 1
    return agent, result.to_state().to_string()


async def approved(agent: Agent, saved: str) -> RunState:
    state = await RunState.from_string(agent, saved)
    for item in state.get_interruptions():
        state.approve(item)
    return state


@pytest.mark.parametrize("restart", [False, True], ids=["same session", "new session object"])
async def test_resuming_after_clear_session_raises_a_clear_error(restart: bool) -> None:
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, "t", "u")
        model = scripted()
        agent, saved = await stopped(session, model)
        await session.clear_session()
        if restart:
            session = ObsmemSession(memory, "t", "u")
        calls = len(model.calls)
        with pytest.raises(InvalidInputError, match=r"session 't' no longer holds.*'c1'.*run is over"):
            await Runner.run(agent, await approved(agent, saved), session=session, run_config=CONFIG)
        assert len(model.calls) == calls
        assert await memory.list_messages("t") == []  # nothing of the cleared run stored
        result = await Runner.run(agent, "what now?", session=session, run_config=CONFIG)
        assert result.final_output == "noted it"  # (the script's next step)
        assert [m.text for m in await memory.list_messages("t")] == ["what now?", "noted it"]


async def test_resuming_after_the_pending_call_was_popped_raises_a_clear_error() -> None:
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, "t", "u")
        model = scripted()
        agent, saved = await stopped(session, model)
        popped = await session.pop_item()
        assert popped is not None and popped.get("type") == "function_call"
        calls = len(model.calls)
        with pytest.raises(InvalidInputError, match=r"session 't' no longer holds.*'c1'"):
            await Runner.run(agent, await approved(agent, saved), session=session, run_config=CONFIG)
        assert len(model.calls) == calls
        assert [m.text for m in await memory.list_messages("t")] == ["my secret is tulipsun, note it"]


async def test_control_a_resume_of_a_session_kept_goes_on() -> None:
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, "t", "u")
        agent, saved = await stopped(session, scripted())
        result = await Runner.run(agent, await approved(agent, saved), session=session, run_config=CONFIG)
        assert result.final_output == "noted it"
        stored = await memory.list_messages("t")
    assert [(m.role, len(m.tool_calls), len(m.tool_results)) for m in stored] == [
        ("user", 0, 0), ("assistant", 1, 0), ("tool", 0, 1), ("assistant", 0, 0)]
