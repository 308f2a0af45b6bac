"""pydantic-ai ``run_stream`` whose final response holds tool calls (an output tool, and with
``end_strategy='exhaustive'`` a function tool that ran): their returns are stored (helper-192,
found by helper 188).

pydantic-ai appends the request holding those returns only to the ``StreamedRunResult``'s own
copy of the history; ``after_run``'s ``result.all_messages()`` ends at the response. The next run
(no ``message_history``, as the README says is enough) closed the calls with "No result: ...", so
memory said the side tool gave nothing although it ran. Passing ``run.all_messages()`` back must
still store each return once (the model gets each call answered once). ``run``,
``run_stream_events`` and ``iter`` are the controls: their history holds the returns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

CONFIRMATION = "Booked: confirmation ZX-881"


class Booking(BaseModel):
    status: str


class Model:
    """Answers each request with a call of ``book`` and of the output tool (streamed or not);
    keeps what each request sent."""

    def __init__(self) -> None:
        self.sent: list[list[pai.ModelMessage]] = []

    def _parts(self, messages: list[pai.ModelMessage], info: AgentInfo) -> list[pai.ToolCallPart]:
        n = len(messages)
        return [
            pai.ToolCallPart("book", {}, tool_call_id=f"book-{n}"),
            pai.ToolCallPart(info.output_tools[0].name, {"status": "ok"}, tool_call_id=f"out-{n}"),
        ]

    def answer(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.sent.append(list(messages))
        return pai.ModelResponse(parts=list(self._parts(messages, info)))

    async def stream(self, messages: list[pai.ModelMessage], info: AgentInfo) -> AsyncIterator[dict[int, DeltaToolCall]]:
        self.sent.append(list(messages))
        yield {
            i: DeltaToolCall(name=p.tool_name, json_args=p.args_as_json_str(), tool_call_id=p.tool_call_id)
            for i, p in enumerate(self._parts(messages, info))
        }


def _agent(memory: Memory, model: Model, end_strategy: str = "exhaustive") -> Agent[None, Booking]:
    agent = Agent(FunctionModel(model.answer, stream_function=model.stream), output_type=Booking,
                  end_strategy=end_strategy,  # type: ignore[arg-type]
                  capabilities=[ObservationalMemory(memory, resource_id="u")])

    @agent.tool_plain
    def book() -> str:
        return CONFIRMATION

    return agent


async def _results(memory: Memory, thread: str) -> dict[str, list[str]]:
    """Each stored tool call's id → the results stored for it, in order."""
    out: dict[str, list[str]] = {}
    for message in await memory.list_messages(thread):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                out.setdefault(part.tool_call_id, [])
            elif isinstance(part, ToolResultPart):
                out.setdefault(part.tool_call_id, []).append(str(part.result))
    return out


def _answers(sent: list[pai.ModelMessage]) -> dict[str, int]:
    """How many returns each call id has in one request."""
    counts: dict[str, int] = {}
    for message in sent:
        for part in message.parts:
            if isinstance(part, pai.ToolReturnPart | pai.RetryPromptPart):
                counts[part.tool_call_id] = counts.get(part.tool_call_id, 0) + 1
    return counts


async def test_the_final_tool_returns_of_a_streamed_run_are_stored() -> None:
    async with Memory("memory://") as memory:
        model = Model()
        agent = _agent(memory, model)
        async with agent.run_stream("Book the flight.", conversation_id="t1") as run:
            await run.get_output()
        async with agent.run_stream("Thanks.", conversation_id="t1") as run:
            await run.get_output()
        results = await _results(memory, "t1")
        assert results["book-1"] == [CONFIRMATION], results
        assert results["out-1"] == ["Final result processed."], results
        # the second run's model saw the tool's real result, once
        assert _answers(model.sent[1]) == {"book-1": 1, "out-1": 1}
        assert any(
            isinstance(p, pai.ToolReturnPart) and p.content == CONFIRMATION
            for m in model.sent[1] for p in m.parts
        )


async def test_the_output_tool_return_of_a_streamed_run_is_stored_with_the_default_strategy() -> None:
    async with Memory("memory://") as memory:
        model = Model()
        agent = _agent(memory, model, end_strategy="early")
        async with agent.run_stream("Book the flight.", conversation_id="t1") as run:
            await run.get_output()
        async with agent.run_stream("Thanks.", conversation_id="t1") as run:
            await run.get_output()
        results = await _results(memory, "t1")
        assert results["out-1"] == ["Final result processed."], results
        # book did not run (a final result came first): said so, not taken for a result
        assert results["book-1"] == ["Tool not executed - a final result was already processed."], results
        assert _answers(model.sent[1]) == {"book-1": 1, "out-1": 1}


async def test_the_streamed_history_passed_back_stores_each_return_once() -> None:
    async with Memory("memory://") as memory:
        model = Model()
        agent = _agent(memory, model)
        async with agent.run_stream("Book the flight.", conversation_id="t1") as run:
            await run.get_output()
        history = run.all_messages()
        async with agent.run_stream("Thanks.", conversation_id="t1", message_history=history) as run2:
            await run2.get_output()
        async with agent.run_stream("Bye.", conversation_id="t1", message_history=run2.all_messages()) as run3:
            await run3.get_output()
        results = await _results(memory, "t1")
        assert results["book-1"] == [CONFIRMATION], results
        assert results["out-1"] == ["Final result processed."], results
        assert results["book-3"] == [CONFIRMATION], results
        for sent in model.sent[1:]:
            assert all(count == 1 for count in _answers(sent).values()), _answers(sent)
        assert _answers(model.sent[2]) == {"book-1": 1, "out-1": 1, "book-3": 1, "out-3": 1}
        stored = await memory.list_messages("t1")
        assert [m.role for m in stored] == ["user", "assistant", "tool"] * 3


async def test_a_streamed_final_tool_retry_is_stored() -> None:
    """A function tool of the final streamed response that asks for a retry: its retry is what it
    gave (the run ends with the streamed output all the same)."""
    async with Memory("memory://") as memory:
        model = Model()
        agent = Agent(FunctionModel(model.answer, stream_function=model.stream), output_type=Booking,
                      end_strategy="exhaustive", capabilities=[ObservationalMemory(memory, resource_id="u")])

        @agent.tool_plain
        def book() -> str:
            raise ModelRetry("No seats left on that flight.")

        async with agent.run_stream("Book the flight.", conversation_id="t1") as run:
            await run.get_output()
        async with agent.run_stream("Thanks.", conversation_id="t1") as run:
            await run.get_output()
        results = await _results(memory, "t1")
        assert len(results["book-1"]) == 1 and "No seats left" in results["book-1"][0], results


async def test_run_with_the_exhaustive_strategy_stores_the_returns() -> None:
    async with Memory("memory://") as memory:
        model = Model()
        agent = _agent(memory, model)
        await agent.run("Book the flight.", conversation_id="t1")
        await agent.run("Thanks.", conversation_id="t1")
        results = await _results(memory, "t1")
        assert results["book-1"] == [CONFIRMATION], results
        assert _answers(model.sent[1]) == {"book-1": 1, "out-1": 1}


async def test_run_stream_events_stores_the_returns() -> None:
    async with Memory("memory://") as memory:
        model = Model()
        agent = _agent(memory, model)
        for prompt in ("Book the flight.", "Thanks."):
            async with agent.run_stream_events(prompt, conversation_id="t1") as events:
                async for _ in events:
                    pass
        results = await _results(memory, "t1")
        assert results["book-1"] == [CONFIRMATION], results
        assert results["out-1"] == ["Final result processed."], results


async def test_iter_streaming_each_node_stores_the_returns() -> None:
    async with Memory("memory://") as memory:
        model = Model()
        agent = _agent(memory, model)
        for prompt in ("Book the flight.", "Thanks."):
            async with agent.iter(prompt, conversation_id="t1") as agent_run:
                async for node in agent_run:
                    if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                        async with node.stream(agent_run.ctx) as events:
                            async for _ in events:
                                pass
        results = await _results(memory, "t1")
        assert results["book-1"] == [CONFIRMATION], results
        assert results["out-1"] == ["Final result processed."], results
