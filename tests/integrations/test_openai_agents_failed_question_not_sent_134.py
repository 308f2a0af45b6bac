"""helper-133: OpenAI Agents session. After a run failed at its model call (provider down), the
user asks something else. Since be0083e, get_items at a run's start leaves out EVERY trailing
unanswered input a run saved (openai_agents_run_input), not only the one being retried, so the
model answering the new question never sees the question(s) the user asked just before (on
5e4a9e8 it did). Two failed runs in a row: both are missing."""
from __future__ import annotations

import pytest
from agents import Agent, Runner

from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession
from tests.integrations.test_openai_agents_retry_130 import RUN, Provider, _questions

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_question_of_a_failed_run_is_sent_with_the_next_question() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-h133", resource_id="u")
        await Runner.run(agent, "Where does Rex walk?", session=session, run_config=RUN)
        provider.down = True
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "Book the vet for Rex on Friday at 10.", session=session, run_config=RUN)
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "Hello? Did you get that?", session=session, run_config=RUN)
        provider.down = False
        await Runner.run(agent, "Are you there?", session=session, run_config=RUN)
        asked = _questions(provider.inputs[-1])
        assert asked[-1] == "Are you there?"
        # what the user asked before the outage is in the model's input (stored, in order)
        assert "Book the vet for Rex on Friday at 10." in asked, asked
        assert "Hello? Did you get that?" in asked, asked
