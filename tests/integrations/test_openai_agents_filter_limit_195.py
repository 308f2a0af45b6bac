"""OpenAI Agents SDK: ``SessionSettings(limit=N)`` with ``RunConfig(call_model_input_filter=
session.model_input_filter)`` (helper 195). The run's first model call got the newest N items of
the session's history and the run's input; every later call of the run (after a tool step) got the
whole unobserved history: the filter sent the turn's context without the limit. Now each call of
the run gets the same limited history, then the run's own items, as the SDK sends them without
the filter."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def said(items: Any) -> list[str]:
    """Each item as its kind and text (or call id), to compare inputs."""
    out = []
    for item in items if isinstance(items, list) else [{"role": "user", "content": items}]:
        content = item.get("content")
        text = content if isinstance(content, str) else " ".join(
            str(c.get("text")) for c in content or [] if isinstance(c, dict))
        out.append(f"{item.get('type') or 'message'}:{item.get('role') or item.get('call_id')}:{text}")
    return out


@pytest.mark.parametrize("where", ["session", "run_config"])
async def test_every_model_call_of_a_run_gets_the_limited_history(where: str) -> None:
    settings = SessionSettings(limit=2)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, "t", "u", session_settings=settings if where == "session" else None)
        config = RunConfig(
            tracing_disabled=True, call_model_input_filter=session.model_input_filter,
            session_settings=settings if where == "run_config" else None,
        )
        model = ScriptedModel([
            [assistant_message("answer one")], [assistant_message("answer two")],
            [function_call("weather", {"city": "Oslo"}, call_id="c1")],
            [assistant_message("sunny")],
        ])
        agent = Agent(name="a", model=model, tools=[weather])
        for question in ("question one", "question two", "weather in Oslo?"):
            await Runner.run(agent, question, session=session, run_config=config)
    first, second = (said(call.input) for call in model.calls[-2:])
    assert first == ["message:user:question two", "message:assistant:answer two", "message:user:weather in Oslo?"]
    assert second[:3] == first
    assert [s.split(":")[0] for s in second[3:]] == ["function_call", "function_call_output"]
