"""pydantic-ai: a run that failed after its tools ran, run again with the same prompt (helper-141).

The provider fails at the model call that follows a tool (a 500 mid-loop); the user runs the agent
again with the same prompt. obsmem had stored the prompt, the calls and their results; the retry
stored the prompt a second time after them and every request of it (and of later runs) sent the
question twice. Now the retry takes the stored prompt: the model gets the question once with the
steps that ran and answers from their results (the tool does not run again). The same prompt after
an answer (text, or a structured output's output tool) or with a deferred call still waiting is a
new message, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.integrations.pydantic_ai import ObservationalMemory

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)
QUESTION = "What is the weather in Lyon and in Paris?"


def _prompts(call: list[pai.ModelMessage], text: str) -> int:
    return sum(1 for m in call for p in m.parts if type(p) is pai.UserPromptPart and p.content == text)


def _valid(call: list[pai.ModelMessage]) -> bool:
    """Every tool call is answered in the request right after its response, and nothing else is."""
    waiting: set[str] = set()
    for message in call:
        if isinstance(message, pai.ModelResponse):
            if waiting:
                return False
            waiting = {p.tool_call_id for p in message.parts if isinstance(p, pai.ToolCallPart)}
            continue
        for part in message.parts:
            if isinstance(part, pai.ToolReturnPart | pai.RetryPromptPart) and part.tool_name:
                if part.tool_call_id not in waiting:
                    return False
                waiting.discard(part.tool_call_id)
    return not waiting


class Weather:
    """A model that calls the weather tool for Lyon, then for Paris, then answers; its call made
    once ``fail`` tool results are in the conversation raises, once (the provider down)."""

    def __init__(self, fail: int) -> None:
        self.fail: int | None = fail
        self.calls: list[list[pai.ModelMessage]] = []
        self.ran: list[str] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        returns = sum(1 for m in messages for p in m.parts if isinstance(p, pai.ToolReturnPart))
        if returns == self.fail:
            self.fail = None
            raise RuntimeError("provider 500")
        if returns == 0:
            return pai.ModelResponse(parts=[pai.ToolCallPart("weather", {"city": "Lyon"}, tool_call_id="l1")])
        if returns == 1:
            return pai.ModelResponse(parts=[pai.ToolCallPart("weather", {"city": "Paris"}, tool_call_id="p1")])
        return pai.ModelResponse(parts=[pai.TextPart("Lyon: sun, Paris: rain")])

    def agent(self, memory: Memory, **options: Any) -> Agent[None, str]:
        agent: Agent[None, str] = Agent(
            FunctionModel(self), capabilities=[ObservationalMemory(memory, resource_id="u")], **options
        )

        @agent.tool_plain
        def weather(city: str) -> str:
            self.ran.append(city)
            return f"{city}: {'sun' if city == 'Lyon' else 'rain'}"

        return agent


@pytest.mark.parametrize("fail", [1, 2], ids=["after-one-tool", "after-two-tools"])
@pytest.mark.parametrize("system", [None, "You are a weather bot."], ids=["no-system", "system-prompt"])
async def test_a_run_failed_after_its_tools_is_retried_with_the_prompt_stored_and_sent_once(
    fail: int, system: str | None
) -> None:
    model = Weather(fail=fail)
    async with Memory("memory://", config=QUIET) as memory:
        agent = model.agent(memory, **({"system_prompt": system} if system else {}))
        with pytest.raises(RuntimeError, match="provider 500"):
            await agent.run(QUESTION, conversation_id="c1")
        ran_before = list(model.ran)
        first_retry = len(model.calls)
        result = await agent.run(QUESTION, conversation_id="c1")
        assert result.output == "Lyon: sun, Paris: rain"
        retried = model.calls[first_retry:]
        for call in retried:
            assert _prompts(call, QUESTION) == 1, call
            assert _valid(call), call
        # the steps that ran are sent again, and the tools that ran do not run again
        assert ran_before == (["Lyon"] if fail == 1 else ["Lyon", "Paris"])
        assert model.ran == ["Lyon", "Paris"]
        stored = await memory.list_messages("c1")
        assert [m.text for m in stored if m.role == "user"] == [QUESTION]
        assert len([c for m in stored for c in m.tool_calls]) == 2
        assert len([r for m in stored for r in m.tool_results]) == 2
        # a later run sends the question once too
        model.fail = 99
        await agent.run("Thanks!", conversation_id="c1")
        assert _prompts(model.calls[-1], QUESTION) == 1 and _valid(model.calls[-1])


class City(BaseModel):
    name: str


async def test_the_same_prompt_after_a_structured_answer_is_a_new_message() -> None:
    """A run whose answer was an output tool's call ends with a tool result too: not a failed run."""
    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        return pai.ModelResponse(parts=[pai.ToolCallPart(info.output_tools[0].name, {"name": "Lyon"})])

    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(FunctionModel(model), output_type=City,
                      capabilities=[ObservationalMemory(memory, resource_id="u")])
        for _ in range(2):
            assert (await agent.run("Which city?", conversation_id="c1")).output == City(name="Lyon")
        stored = await memory.list_messages("c1")
    assert [m.text for m in stored if m.role == "user"] == ["Which city?", "Which city?"]


async def test_the_same_prompt_while_a_deferred_call_waits_is_a_new_message() -> None:
    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        if isinstance(messages[-1].parts[-1], pai.UserPromptPart):
            n = len(messages)
            return pai.ModelResponse(parts=[
                pai.ToolCallPart("delete_file", {"path": "x"}, tool_call_id=f"d{n}"),
                pai.ToolCallPart("look", {"path": "x"}, tool_call_id=f"l{n}"),
            ])
        return pai.ModelResponse(parts=[pai.TextPart("done")])

    async with Memory("memory://", config=QUIET) as memory:
        agent: Agent[None, str | DeferredToolRequests] = Agent(
            FunctionModel(model), output_type=[str, DeferredToolRequests],
            capabilities=[ObservationalMemory(memory, resource_id="u")],
        )

        @agent.tool_plain(requires_approval=True)
        def delete_file(path: str) -> str:
            return "deleted"

        @agent.tool_plain
        def look(path: str) -> str:
            return "looked"

        for _ in range(2):
            assert isinstance((await agent.run("Delete x", conversation_id="c1")).output, DeferredToolRequests)
        stored = await memory.list_messages("c1")
    assert [m.text for m in stored if m.role == "user"] == ["Delete x", "Delete x"]
