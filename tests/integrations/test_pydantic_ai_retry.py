"""pydantic-ai: a run that failed at its model call (the provider down), retried with the same
prompt. obsmem had saved the failed run's prompt (a failed call leaves its messages pending, as it
should), and the retry saved it again: the thread held the question twice and every later request
sent it twice, where pydantic-ai without obsmem sends it once."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory

pytestmark = pytest.mark.anyio


class Flaky:
    """A FunctionModel function that fails while ``down``, else answers with a numbered text;
    records every request it got."""

    def __init__(self) -> None:
        self.down = False
        self.requests: list[list[pai.ModelMessage]] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.requests.append(list(messages))
        if self.down:
            raise ConnectionError("provider down")
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(self.requests)}")])


def _prompts(request: list[pai.ModelMessage]) -> list[str]:
    return [str(p.content) for m in request for p in m.parts if isinstance(p, pai.UserPromptPart)]


async def test_a_prompt_retried_after_a_failed_run_is_stored_and_sent_once() -> None:
    model = Flaky()
    async with Memory("memory://") as memory:
        agent = Agent(FunctionModel(model), system_prompt="You help.",
                      capabilities=[ObservationalMemory(memory, resource_id="u")])  # fmt: skip
        await agent.run("Where does Rex like to walk?", conversation_id="c1")
        model.down = True
        with pytest.raises(ConnectionError):
            await agent.run("And what does he eat?", conversation_id="c1")
        stored = [m.text for m in await memory.list_messages("c1") if m.role == "user"]
        assert stored == ["Where does Rex like to walk?", "And what does he eat?"]  # nothing lost

        model.down = False
        result = await agent.run("And what does he eat?", conversation_id="c1")

        assert result.output == f"answer {len(model.requests)}"
        assert _prompts(model.requests[-1]) == ["Where does Rex like to walk?", "And what does he eat?"]
        stored = [(m.role, m.text) for m in await memory.list_messages("c1") if m.role != "system"]
        assert stored == [
            ("user", "Where does Rex like to walk?"), ("assistant", "answer 1"),
            ("user", "And what does he eat?"), ("assistant", f"answer {len(model.requests)}"),
        ]


async def test_a_different_prompt_after_a_failed_run_keeps_both() -> None:
    """The unanswered prompt stays (nothing lost); a new question is a new message."""
    model = Flaky()
    async with Memory("memory://") as memory:
        agent = Agent(FunctionModel(model), capabilities=[ObservationalMemory(memory, resource_id="u")])
        await agent.run("Where does Rex like to walk?", conversation_id="c2")
        model.down = True
        with pytest.raises(ConnectionError):
            await agent.run("And what does he eat?", conversation_id="c2")
        model.down = False
        await agent.run("Never mind: how old is he?", conversation_id="c2")

        assert _prompts(model.requests[-1]) == [
            "Where does Rex like to walk?", "And what does he eat?", "Never mind: how old is he?"]
        assert [m.text for m in await memory.list_messages("c2") if m.role == "user"] == [
            "Where does Rex like to walk?", "And what does he eat?", "Never mind: how old is he?"]


async def test_the_same_prompt_again_after_an_answer_is_a_new_message() -> None:
    """Only an unanswered prompt is taken back: asking the same thing again after an answer is
    the user's own repetition, stored and sent as such."""
    model = Flaky()
    async with Memory("memory://") as memory:
        agent = Agent(FunctionModel(model), capabilities=[ObservationalMemory(memory, resource_id="u")])
        await agent.run("Say it again?", conversation_id="c3")
        await agent.run("Say it again?", conversation_id="c3")
        assert [m.text for m in await memory.list_messages("c3") if m.role == "user"] == ["Say it again?"] * 2
        assert _prompts(model.requests[-1]) == ["Say it again?"] * 2
