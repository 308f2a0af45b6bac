"""pydantic-ai sends an output validator's ``ModelRetry`` (or a failed structured output's
errors) to the model as a request of its own. Those are the framework's words, not the user's:
the model sees them where they stand, but memory must not note them as something the user said.
Before, they were stored as plain user messages and the observers wrote "User asked the assistant
to reply with the word good and nothing else, they insist" into long-term memory."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory
from obsmem.models.testing import FunctionModel as ObsmemFunctionModel

pytestmark = pytest.mark.anyio

QUESTIONS = ["I live in Oslo", "I have a dog named Rex", "My sister is Ana", "what now"]


def _agent(memory: Memory) -> Agent[None, str]:
    answers = iter(["bad", "good"] * 10)
    seen: list[list[pai.ModelMessage]] = []

    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        seen.append(list(messages))
        return pai.ModelResponse(parts=[pai.TextPart(next(answers))])

    agent: Agent[None, str] = Agent(
        FunctionModel(model), system_prompt="Answer briefly.", capabilities=[ObservationalMemory(memory, resource_id="u")]
    )

    @agent.output_validator
    def check(output: str) -> str:
        if output == "bad":
            raise ModelRetry("Please reply with the word good and nothing else, I insist")
        return output

    agent.seen = seen  # type: ignore[attr-defined]
    return agent


async def test_the_offline_observer_does_not_take_retry_feedback_for_the_user() -> None:
    config = {"observation": {"message_tokens": 60, "buffer_tokens": False}}
    async with Memory("memory://", config=config) as memory:
        agent = _agent(memory)
        for question in QUESTIONS:
            result = await agent.run(question, conversation_id="o")
            assert result.output == "good"
        observations = await memory.get_observations("o")
        assert "Oslo" in observations and "Rex" in observations, observations
        assert "insist" not in observations, observations
        # the model was sent the feedback where it stood, within its run
        retry_call = agent.seen[1]  # type: ignore[attr-defined]
        assert "insist" in str(retry_call[-1]), "the retry feedback reached the model"


async def test_a_hosted_observer_is_not_shown_retry_feedback_as_the_user() -> None:
    prompts: list[str] = []

    def observe(messages: Any, settings: Any) -> str:
        prompts.append("\n".join(m.text for m in messages))
        return "<observations>\n* 🔴 (10:00) User lives in Oslo.\n</observations>"

    config = {"observation": {"message_tokens": 60, "buffer_tokens": False}}
    async with Memory("memory://", config=config, observer=ObsmemFunctionModel(observe)) as memory:
        agent = _agent(memory)
        for question in QUESTIONS:
            await agent.run(question, conversation_id="o")
        await memory.settled()
        assert prompts, "the observer ran"
        transcript = "\n".join(prompts)
        assert "Oslo" in transcript
        assert "insist" not in transcript, transcript
