"""pydantic-ai: an approval given after the user went on (helper-171).

A tool that needs approval ends a run with ``DeferredToolRequests``; the user asks something else
before answering it (obsmem closes the waiting call with a "no result" answer so the thread stays
valid), then approves or denies: the app runs the agent with the history that asked for the
approval and ``deferred_tool_results``, as pydantic-ai's docs do. obsmem puts the real result in
the "no result" answer's place. The request of that run also sent the result at its end, after the
later turns: a tool return no call precedes, and a second answer to its call. OpenAI refuses such a
request (HTTP 400), after the approved tool ran. Now the result is sent once, in its call's place.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.integrations.pydantic_ai import ObservationalMemory
from tests.integrations.agent_model import AgentModel, ToolRule
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=4000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=8000),
)


def _problems(call: list[pai.ModelMessage]) -> list[str]:
    """What a provider refuses in a request: a tool return its call does not directly precede,
    a call answered twice or not at all."""
    problems: list[str] = []
    waiting: set[str] = set()
    answered: set[str] = set()
    for message in call:
        if isinstance(message, pai.ModelResponse):
            if waiting:
                problems.append(f"unanswered {sorted(waiting)}")
            waiting = {p.tool_call_id for p in message.parts if isinstance(p, pai.ToolCallPart)}
            continue
        for part in message.parts:
            if isinstance(part, pai.ToolReturnPart | pai.RetryPromptPart) and part.tool_name:
                if part.tool_call_id in answered:
                    problems.append(f"{part.tool_call_id} answered twice")
                elif part.tool_call_id not in waiting:
                    problems.append(f"{part.tool_call_id} answered with no call before it")
                waiting.discard(part.tool_call_id)
                answered.add(part.tool_call_id)
    return problems


def _returns(call: list[pai.ModelMessage], call_id: str) -> list[object]:
    return [
        p.content for m in call for p in m.parts if isinstance(p, pai.ToolReturnPart) and p.tool_call_id == call_id
    ]


class Recorder:
    """A model that calls ``delete_file`` when asked to delete, else answers; keeps every request."""

    def __init__(self) -> None:
        self.calls: list[list[pai.ModelMessage]] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        last = messages[-1].parts[-1] if messages[-1].parts else None
        if isinstance(last, pai.UserPromptPart) and "delete" in str(last.content):
            return pai.ModelResponse(parts=[pai.ToolCallPart("delete_file", {"path": "x"}, tool_call_id="d1")])
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(self.calls)}")])


def _agent(model: object, memory: Memory) -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        model,  # type: ignore[arg-type]
        system_prompt="You manage files.", output_type=[str, DeferredToolRequests],
        capabilities=[ObservationalMemory(memory, resource_id="u")],
    )

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    return agent


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("moved_on", [True, False])
async def test_an_approval_given_late_is_sent_once_in_its_place(decision: str, moved_on: bool) -> None:
    model = Recorder()
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(FunctionModel(model), memory)
        asked = await agent.run("please delete x", conversation_id="c1")
        assert isinstance(asked.output, DeferredToolRequests)
        if moved_on:
            await agent.run("actually, what time is it?", conversation_id="c1")
        results = DeferredToolResults(approvals={"d1": True if decision == "approve" else ToolDenied("no")})
        await agent.run(conversation_id="c1", message_history=asked.all_messages(), deferred_tool_results=results)
        sent = model.calls[-1]
        assert _problems(sent) == []
        assert _returns(sent, "d1") == (["deleted x"] if decision == "approve" else ["no"])
        await agent.run("thanks", conversation_id="c1")
        assert _problems(model.calls[-1]) == []
        assert _returns(model.calls[-1], "d1") == (["deleted x"] if decision == "approve" else ["no"])


@pytest.fixture
def server() -> Iterator[tuple[WireServer, AgentModel]]:
    with WireServer() as wire:
        model = AgentModel(rules=[ToolRule(r"delete (\w+)", "delete_file", lambda m: {"path": m.group(1)})])
        wire.responder = model
        yield wire, model


async def test_a_late_approval_over_openai_chat_is_not_refused(server: tuple[WireServer, AgentModel]) -> None:
    wire, responder = server
    provider = OpenAIProvider(base_url=f"{wire.url}/v1", api_key="test-key")
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(OpenAIChatModel("agent-test-model", provider=provider), memory)
        asked = await agent.run("please delete x", conversation_id="c1")
        assert isinstance(asked.output, DeferredToolRequests)
        await agent.run("actually, what time is it?", conversation_id="c1")
        results = DeferredToolResults(approvals={asked.output.approvals[0].tool_call_id: True})
        done = await agent.run(conversation_id="c1", message_history=asked.all_messages(), deferred_tool_results=results)
        assert isinstance(done.output, str)
        assert responder.invalid == []


async def test_a_model_that_reuses_call_ids_gets_each_return_after_its_call() -> None:
    """A model (some OpenAI-compatible servers) that names every call ``call_0``: each turn's
    return answers its own turn's call, not the earlier one of the same id."""
    calls: list[list[pai.ModelMessage]] = []

    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        calls.append(list(messages))
        if isinstance(messages[-1].parts[-1], pai.UserPromptPart):
            return pai.ModelResponse(parts=[pai.ToolCallPart("lookup", {"q": "x"}, tool_call_id="call_0")])
        return pai.ModelResponse(parts=[pai.TextPart("found")])

    async with Memory("memory://", config=QUIET) as memory:
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[ObservationalMemory(memory, resource_id="u")])
        answers = iter(["first", "second", "third"])

        @agent.tool_plain
        def lookup(q: str) -> str:
            return next(answers)

        for question in ["one?", "two?", "three?"]:
            await agent.run(question, conversation_id="c1")
    assert _returns(calls[-1], "call_0") == ["first", "second", "third"]
    assert isinstance(calls[-1][-1].parts[-1], pai.ToolReturnPart)
