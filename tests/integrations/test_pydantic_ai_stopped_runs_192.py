"""pydantic-ai with obsmem: a run stopped while its tools run keeps what the tools that finished
did (helper-192).

The model's response and its tool returns are saved before the next model request. A run that
stops between (cancelled: the user left, a timeout; or another tool of the same response raising)
never made that request: a tool that had finished (an email sent) left no trace in memory, and the
next run knew nothing of it. Now the response and the returns of the tools that finished are
saved when the run stops; the calls that did not finish are closed as unanswered.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory
from obsmem.types import ToolCallPart, ToolResultPart
from tests.integrations.test_pydantic_ai_late_approval_171 import QUIET, _problems

pytestmark = pytest.mark.anyio


class Model:
    """Asked to email bob, calls ``send_email`` and ``slow_check`` at once; else answers."""

    def __init__(self) -> None:
        self.sent: list[list[pai.ModelMessage]] = []

    def _reply(self, messages: list[pai.ModelMessage]) -> pai.ModelResponse:
        last = messages[-1].parts[-1] if messages[-1].parts else None
        if isinstance(last, pai.UserPromptPart) and last.content == "email bob":
            return pai.ModelResponse(parts=[
                pai.ToolCallPart("send_email", {"to": "bob"}, tool_call_id="e1"),
                pai.ToolCallPart("slow_check", {}, tool_call_id="c1"),
            ])
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(self.sent)}")])

    def answer(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.sent.append(list(messages))
        return self._reply(messages)

    async def stream(self, messages: list[pai.ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        self.sent.append(list(messages))
        reply = self._reply(messages)
        for index, part in enumerate(reply.parts):
            if isinstance(part, pai.TextPart):
                yield part.content
            elif isinstance(part, pai.ToolCallPart):
                yield {index: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id)}


async def _go(agent: Agent[None, str], prompt: str, stream: bool) -> None:
    if stream:
        async with agent.run_stream(prompt, conversation_id="t1") as run:
            await run.get_output()
    else:
        await agent.run(prompt, conversation_id="t1")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("stop", ["cancelled", "other tool failed"])
async def test_a_tool_that_finished_before_the_run_stopped_is_stored(stop: str, stream: bool) -> None:
    model = Model()
    sent_to: list[str] = []
    emailed = asyncio.Event()
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(FunctionModel(model.answer, stream_function=model.stream),
                      capabilities=[ObservationalMemory(memory, resource_id="u")])

        @agent.tool_plain
        async def send_email(to: str) -> str:
            sent_to.append(to)
            emailed.set()
            return f"sent to {to}"

        @agent.tool_plain
        async def slow_check() -> str:
            await emailed.wait()
            if stop == "other tool failed":
                raise RuntimeError("the check service is down")
            await asyncio.sleep(30)
            return "checked"

        task = asyncio.ensure_future(_go(agent, "email bob", stream))
        await asyncio.wait([task, asyncio.ensure_future(emailed.wait())], return_when=asyncio.FIRST_COMPLETED)
        assert emailed.is_set(), task.exception()
        if stop == "cancelled":
            await asyncio.sleep(0.01)
            task.cancel()
        with pytest.raises((asyncio.CancelledError, RuntimeError)):
            await task
        assert sent_to == ["bob"]

        await _go(agent, "did it go out?", stream)
        assert _problems(model.sent[-1]) == []
        returns = [p.content for m in model.sent[-1] for p in m.parts if isinstance(p, pai.ToolReturnPart)]
        assert "sent to bob" in returns
        stored = await memory.list_messages("t1")
        calls = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        results = {p.tool_call_id: str(p.result) for m in stored for p in m.parts if isinstance(p, ToolResultPart)}
        assert calls == ["e1", "c1"]
        assert results["e1"] == "sent to bob"
        assert results["c1"].startswith("No result"), results
