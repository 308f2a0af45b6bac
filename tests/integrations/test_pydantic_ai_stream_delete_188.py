"""pydantic-ai's ``run_stream`` with obsmem: a thread or resource deleted stays deleted when the
app passes the streamed run's messages back (helper-188).

``run_stream`` hands the app its own copy of the final response (and, with an output tool, of the
request holding the tool's return), without the capability's tags: the capability matches the
copy to what it stored by a content-derived id. After ``delete_thread`` / ``delete_resource`` that
id is stored nowhere, so the copy was taken for a new message: the deleted answer was stored again
in the recreated thread and sent to the model, secret included. The tagged messages of the same
history were not (they carry ``obsmem_saved_in``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from obsmem import Memory, Message
from obsmem.integrations.pydantic_ai import ObservationalMemory

pytestmark = pytest.mark.anyio

SECRET = "4417-8823"


class Code(BaseModel):
    code: str


class Recorder:
    """Answers every request (streamed or not) with the secret, as text or through the output
    tool; keeps what each request sent."""

    def __init__(self) -> None:
        self.calls: list[list[pai.ModelMessage]] = []

    def answer(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        if info.output_tools:
            name = info.output_tools[0].name
            return pai.ModelResponse(parts=[pai.ToolCallPart(name, {"code": "done"}, tool_call_id="o1")])
        return pai.ModelResponse(parts=[pai.TextPart("noted")])

    async def stream(
        self, messages: list[pai.ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        self.calls.append(list(messages))
        if info.output_tools:
            args = json.dumps({"code": SECRET})
            yield {0: DeltaToolCall(name=info.output_tools[0].name, json_args=args, tool_call_id="s1")}
        else:
            yield f"Your door code is {SECRET}."


def _sent(call: list[pai.ModelMessage]) -> str:
    return json.dumps(pai.ModelMessagesTypeAdapter.dump_python(call, mode="json"))


def _holding(messages: list[Message]) -> list[Message]:
    return [m for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


@pytest.mark.parametrize("structured", [False, True], ids=["text", "output-tool"])
@pytest.mark.parametrize("erase", ["thread", "resource"])
async def test_a_deleted_streamed_answer_is_not_stored_or_sent_again(structured: bool, erase: str) -> None:
    model = Recorder()
    async with Memory("memory://") as memory:
        agent: Agent[None, object] = Agent(
            FunctionModel(model.answer, stream_function=model.stream), system_prompt="You keep codes.",
            output_type=Code if structured else str,
            capabilities=[ObservationalMemory(memory, resource_id="dana")],
        )
        async with agent.run_stream("What is my door code?", conversation_id="t1") as streamed:
            await streamed.get_output()
        history = streamed.all_messages()
        assert _holding(await memory.list_messages("t1"))  # positive control

        if erase == "thread":
            assert await memory.delete_thread("t1")
        else:
            await memory.delete_resource("dana")

        await agent.run("Let's start over: hello.", conversation_id="t1", message_history=history)
        stored = await memory.list_messages("t1")
        assert "Let's start over: hello." in [m.text for m in stored]  # the new conversation is kept
        assert not _holding(stored)
        assert SECRET not in _sent(model.calls[-1])
        assert isinstance(model.calls[-1][0].parts[0], pai.SystemPromptPart)  # the app's system prompt leads
        window = await memory.get_context("t1")
        assert SECRET not in json.dumps([m.model_dump(mode="json") for m in window.messages])


async def test_a_streamed_answer_passed_back_without_a_delete_is_stored_once() -> None:
    """The control: the untagged copy of a stored answer is matched to it, not stored again."""
    model = Recorder()
    async with Memory("memory://") as memory:
        agent: Agent[None, str] = Agent(
            FunctionModel(model.answer, stream_function=model.stream),
            capabilities=[ObservationalMemory(memory, resource_id="dana")],
        )
        async with agent.run_stream("What is my door code?", conversation_id="t1") as streamed:
            await streamed.get_output()
        await agent.run("Thanks.", conversation_id="t1", message_history=streamed.all_messages())
        texts = [m.text for m in await memory.list_messages("t1")]
        assert texts == ["What is my door code?", f"Your door code is {SECRET}.", "Thanks.", "noted"]
        assert SECRET in _sent(model.calls[-1])
