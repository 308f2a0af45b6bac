"""The turn's question stays in view through its tool loop (found by the OpenAI Agents test).

A step that observes the turn's user message (a long tool result pushed the window over the
threshold) used to leave the model with the tool call and its result but not the question.
"""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message, ToolCallPart, ToolResultPart
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio


async def test_a_step_that_observes_the_question_still_shows_it() -> None:
    config = MemoryConfig(observation={"message_tokens": 200, "buffer_tokens": False})
    async with Memory("memory://", config=config) as memory:
        for i in range(3):  # some history, so observations exist
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[
                Message.user(f"Earlier question {i} about the Kestrel project budget and its owners.")])
            await turn.end([Message.assistant(f"Earlier answer {i}: the budget is 48,000 euros.")])
        question = Message.user("What is the weather in Paris for day 44?")
        turn = await memory.begin_turn(thread_id="t", messages=[question])
        assert turn.context.messages[-1].id == question.id
        call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="weather",
                                                             args={"city": "Paris"}),))
        context = await turn.step([call])
        result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="weather",
                                                            result="sunny, 24 degrees " * 120),))
        context = await turn.step([result])
        record = await memory.get_record("t")
        assert record is not None and record.cursor("t") >= ((await memory.list_messages("t"))[-3].seq or 0), (
            "the long result made the step observe the question (the case under test)")
        users = [m for m in context.messages if m.role == "user" and m.id == question.id]
        assert users, "the question is not in the context of the step that answers it"
        ids = [m.id for m in context.messages]
        assert ids.index(question.id) < ids.index(call.id) < ids.index(result.id)
        await turn.end([Message.assistant("Sunny, 24 degrees.")])


async def _question_kept_on_a_fresh_thread(memory: Memory) -> None:
    """A new thread's first question, then one tool result larger than ``message_tokens``: the
    step observes the question with nothing before it (so the context may hold no observations at
    all, or an observer may have written nothing for it); the model must still read it."""
    question = Message.user("Go through the page and list every broken link.")
    turn = await memory.begin_turn(thread_id="fresh", resource_id="u",
                                   messages=[Message.system("You are a docs assistant."), question])
    call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="fetch",
                                                         args={"url": "https://docs.example/install"}),))
    await turn.step([call])
    page = " ".join(f"install{i} config{i} docs{i}" for i in range(400))
    result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="fetch", result=page),))
    context = await turn.step([result])
    record = await memory.get_record("fresh")
    assert record is not None and record.cursor("fresh") >= (question_seq := (await memory.list_messages("fresh"))[1].seq or 0), (
        "the long result made the step observe the question (the case under test)")
    assert question_seq
    ids = [m.id for m in context.messages]
    assert question.id in ids, f"the question is not in the step's context: {[m.role for m in context.messages]}"
    assert ids.index(question.id) < ids.index(call.id) < ids.index(result.id)
    assert context.messages[0].role == "system" and "docs assistant" in context.messages[0].text
    await turn.end([Message.assistant("No broken links.")])


async def test_a_fresh_threads_question_stays_in_view_when_its_observation_is_empty() -> None:
    """An observer that finds nothing to note (an LLM answering with empty observations)."""
    config = MemoryConfig(observation={"message_tokens": 200, "buffer_tokens": False})
    empty = FunctionModel(lambda messages, settings: "<observations>\n</observations>")
    async with Memory("memory://", config=config, model=empty) as memory:
        await _question_kept_on_a_fresh_thread(memory)


@pytest.mark.parametrize("buffer", [False, 0.2], ids=["synchronous", "buffered"])
async def test_a_fresh_threads_question_stays_in_view_with_the_offline_observer(buffer: float | bool) -> None:
    config = MemoryConfig(observation={"message_tokens": 200, "buffer_tokens": buffer})
    async with Memory("memory://", config=config) as memory:
        await _question_kept_on_a_fresh_thread(memory)
