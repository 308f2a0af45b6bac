"""pydantic-ai with obsmem, used as an app would (helper-192): several runs of one conversation at
once, the thread deleted while a run is in its tool loop, an approval given late through
``run_stream``, a streamed answer with a tool call after its text (the one that failed before
fd12804: the tool's return was not stored). The others held before: they keep what works.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai import messages as pai
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

from obsmem import Memory
from obsmem.errors import ThreadNotFoundError
from obsmem.integrations.pydantic_ai import ObservationalMemory
from obsmem.types import ToolCallPart, ToolResultPart
from tests.integrations.test_pydantic_ai_late_approval_171 import QUIET, _problems

pytestmark = pytest.mark.anyio


class Model:
    def __init__(self, rule) -> None:
        self.sent: list[list[pai.ModelMessage]] = []
        self.rule = rule

    async def answer(self, messages, info):
        self.sent.append(list(messages))
        return await self.rule(messages, info)

    async def stream(self, messages, info):
        self.sent.append(list(messages))
        reply = await self.rule(messages, info)
        for i, p in enumerate(reply.parts):
            if isinstance(p, pai.TextPart):
                for w in p.content.split(" "):
                    yield w + " "
                    await asyncio.sleep(0)
            else:
                yield {i: DeltaToolCall(name=p.tool_name, json_args=p.args_as_json_str(), tool_call_id=p.tool_call_id)}


@pytest.mark.parametrize("how", ["run", "stream"])
async def test_five_runs_of_one_conversation_at_once_each_answer_their_calls_once(how):
    async def rule(messages, info):
        await asyncio.sleep(0)
        last = messages[-1].parts[-1]
        if isinstance(last, pai.UserPromptPart) and str(last.content).startswith("q"):
            return pai.ModelResponse(parts=[pai.ToolCallPart("lookup", {"q": last.content}, tool_call_id=f"c-{last.content}")])
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(model.sent)}")])
    model = Model(rule)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(FunctionModel(model.answer, stream_function=model.stream), capabilities=[ObservationalMemory(memory, resource_id="u")])
        @agent.tool_plain
        def lookup(q: str) -> str:
            return f"found {q}"
        async def one(q):
            if how == "run":
                await agent.run(q, conversation_id="t1")
            else:
                async with agent.run_stream(q, conversation_id="t1") as r:
                    await r.get_output()
        await asyncio.gather(*(one(f"q{i}") for i in range(5)))
        await agent.run("after", conversation_id="t1")
        for s in model.sent:
            assert _problems(s) == []
        stored = await memory.list_messages("t1")
        calls = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolResultPart)]
        results_text = [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart)]
        assert sorted(calls) == [f"c-q{i}" for i in range(5)]
        assert sorted(results) == sorted(calls), results_text


@pytest.mark.parametrize("how", ["run", "stream"])
async def test_a_thread_deleted_mid_run_stays_deleted(how):
    box = []
    async def rule(messages, info):
        last = messages[-1].parts[-1]
        if isinstance(last, pai.UserPromptPart) and "4417" in str(last.content):
            return pai.ModelResponse(parts=[pai.ToolCallPart("save_card", {}, tool_call_id="s1")])
        if isinstance(last, pai.ToolReturnPart):
            await box[0].delete_thread("t1")
            return pai.ModelResponse(parts=[pai.TextPart("card 4417-8823 saved")])
        return pai.ModelResponse(parts=[pai.TextPart("hello")])
    model = Model(rule)
    async with Memory("memory://", config=QUIET) as memory:
        box.append(memory)
        agent = Agent(FunctionModel(model.answer, stream_function=model.stream), capabilities=[ObservationalMemory(memory, resource_id="u")])
        @agent.tool_plain
        def save_card() -> str:
            return "saved"
        with pytest.raises(ThreadNotFoundError):  # its turn cannot end in a deleted thread
            if how == "run":
                await agent.run("my card is 4417-8823", conversation_id="t1")
            else:
                async with agent.run_stream("my card is 4417-8823", conversation_id="t1") as r:
                    await r.get_output()
        await agent.run("hi", conversation_id="t1")
        assert not any("4417" in str(p) for m in model.sent[-1] for p in m.parts)
        stored = await memory.list_messages("t1")
        assert not any("4417" in m.text for m in stored)


@pytest.mark.parametrize("how", ["run", "stream"])
@pytest.mark.parametrize("moved_on", [True, False])
async def test_a_late_approval_is_sent_once_in_its_place(how, moved_on):
    deleted = []
    async def rule(messages, info):
        last = messages[-1].parts[-1] if messages[-1].parts else None
        if isinstance(last, pai.UserPromptPart) and "delete" in str(last.content):
            return pai.ModelResponse(parts=[pai.ToolCallPart("delete_file", {"path": "x"}, tool_call_id="d1")])
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(model.sent)}")])
    model = Model(rule)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(FunctionModel(model.answer, stream_function=model.stream), output_type=[str, DeferredToolRequests],
                      capabilities=[ObservationalMemory(memory, resource_id="u")])
        @agent.tool_plain(requires_approval=True)
        def delete_file(path: str) -> str:
            deleted.append(path)
            return f"deleted {path}"
        async def go(prompt, **kw):
            if how == "run":
                r = await agent.run(prompt, conversation_id="t1", **kw)
                return r.output, r.all_messages()
            async with agent.run_stream(prompt, conversation_id="t1", **kw) as r:
                out = await r.get_output()
            return out, r.all_messages()
        out, history = await go("delete x")
        assert isinstance(out, DeferredToolRequests)
        if moved_on:
            await go("what time is it?")
        results = DeferredToolResults(approvals={"d1": True})
        await go(None, message_history=history, deferred_tool_results=results)
        assert deleted == ["x"]
        assert _problems(model.sent[-1]) == []
        await go("thanks")
        assert _problems(model.sent[-1]) == []
        stored = await memory.list_messages("t1")
        assert [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart)] == ["deleted x"]


async def test_a_streamed_answer_with_a_tool_call_after_its_text_stores_the_return():
    async def rule(messages, info):
        last = messages[-1].parts[-1]
        if isinstance(last, pai.UserPromptPart) and last.content == "book":
            return pai.ModelResponse(parts=[pai.TextPart("Booking it now"), pai.ToolCallPart("book", {}, tool_call_id="b1")])
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(model.sent)}")])
    model = Model(rule)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(FunctionModel(model.answer, stream_function=model.stream), end_strategy="exhaustive", capabilities=[ObservationalMemory(memory, resource_id="u")])
        ran = []
        @agent.tool_plain
        def book() -> str:
            ran.append(1)
            return "Booked ZX"
        async with agent.run_stream("book", conversation_id="t1") as r:
            assert (await r.get_output()).strip() == "Booking it now"
        assert ran == [1]
        await agent.run("next", conversation_id="t1")
        assert _problems(model.sent[-1]) == []
        stored = await memory.list_messages("t1")
        assert [p.result for m in stored for p in m.parts if isinstance(p, ToolResultPart)] == ["Booked ZX"]
