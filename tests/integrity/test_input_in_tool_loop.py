"""The turn's question stays in view through its tool loop (found by the OpenAI Agents test).

A step that observes the turn's user message (a long tool result pushed the window over the
threshold) used to leave the model with the tool call and its result but not the question.
"""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message, ToolCallPart, ToolResultPart

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
        assert record is not None and record.cursor("t") >= (await memory.list_messages("t"))[-3].seq, (
            "the long result made the step observe the question (the case under test)")
        users = [m for m in context.messages if m.role == "user" and m.id == question.id]
        assert users, "the question is not in the context of the step that answers it"
        ids = [m.id for m in context.messages]
        assert ids.index(question.id) < ids.index(call.id) < ids.index(result.id)
        await turn.end([Message.assistant("Sunny, 24 degrees.")])
