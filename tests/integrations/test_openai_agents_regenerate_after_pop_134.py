"""helper-133: OpenAI Agents session, 'regenerate the answer': the app pops the assistant's answer
(session.pop_item, the SDK's undo) and runs the agent again with no new input. The question is
the thread's newest message, unanswered, and was saved by a run (metadata openai_agents_run_input),
so get_items at the run's start leaves it out (be0083e/3582cb7): the model is sent no question.
On 5e4a9e8 the question was sent."""
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


async def test_regenerating_an_answer_sends_the_question() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-regen", resource_id="u")
        await Runner.run(agent, "Where does Rex walk?", session=session, run_config=RUN)
        await Runner.run(agent, "What does he eat?", session=session, run_config=RUN)
        popped = await session.pop_item()  # the answer to 'What does he eat?'
        assert popped is not None and popped.get("role") == "assistant"
        await Runner.run(agent, [], session=session, run_config=RUN)  # regenerate
        asked = _questions(provider.inputs[-1])
        assert asked and asked[-1] == "What does he eat?", asked


async def test_retrying_a_failed_run_without_new_input_sends_the_question() -> None:
    """The run failed at its model call; the app retries it with no new input (the question is
    already in the session). Its question is left out as 'a failed run's input run again', but
    nothing gives it again: the model gets no question."""
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-retry-empty", resource_id="u")
        await Runner.run(agent, "Where does Rex walk?", session=session, run_config=RUN)
        provider.down = True
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "What does he eat?", session=session, run_config=RUN)
        provider.down = False
        await Runner.run(agent, [], session=session, run_config=RUN)
        asked = _questions(provider.inputs[-1])
        assert asked and asked[-1] == "What does he eat?", asked
