"""A tool's result that comes after the user went on (its call closed as unanswered) takes the
closing's place; the files that came with it (a screenshot, a chart a tool drew: file parts after
the result in its tool message) stayed behind in a tool message of their own at the thread's end.
Sent to a provider, that message was an image from the user after the answer, and the result it
belonged to had none. Found by helper 193 (a late `function_call_output` with an image through the
gateway; every integration too)."""

from __future__ import annotations

import pytest

from obsmem import Memory, to_openai
from obsmem.types import FilePart, Message, TextPart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _png(name: str) -> FilePart:
    return FilePart(media_type="image/png", data=PNG, filename=name)


async def _two_calls_the_user_went_on_from(memory: Memory) -> None:
    turn = await memory.begin_turn(thread_id="t", resource_id="r", messages=[Message.user("chart both")])
    await turn.end([Message(role="assistant", parts=(
        ToolCallPart(tool_call_id="c1", tool_name="chart"), ToolCallPart(tool_call_id="c2", tool_name="chart"),
    ))])
    turn = await memory.begin_turn(thread_id="t", messages=[Message.user("never mind")])
    await turn.end([Message.assistant("ok")])


def _file_names(message: Message) -> list[str | None]:
    return [p.filename for p in message.parts if isinstance(p, FilePart)]


async def test_each_late_results_files_go_with_it() -> None:
    async with Memory("memory://") as memory:
        await _two_calls_the_user_went_on_from(memory)
        late = Message(role="tool", parts=(
            ToolResultPart(tool_call_id="c1", tool_name="chart", result="drawn one"), _png("one.png"),
            ToolResultPart(tool_call_id="c2", tool_name="chart", result="drawn two"), _png("two.png"),
        ))
        turn = await memory.begin_turn(thread_id="t", messages=[late])
        stored = await memory.list_messages("t")
        holding = [m for m in stored if _file_names(m)]
        assert len(holding) == 1 and holding[0].role == "tool"
        parts = holding[0].parts
        order = [(type(p).__name__, getattr(p, "tool_call_id", None) or getattr(p, "filename", None)) for p in parts]
        assert order == [
            ("ToolResultPart", "c1"), ("FilePart", "one.png"), ("ToolResultPart", "c2"), ("FilePart", "two.png"),
        ]
        # the context ends with the user's last words and the answer, no image after them
        assert stored[-1].role == "assistant" and stored[-1].text == "ok"
        wire = to_openai(turn.context.messages)
        assert wire[-1]["role"] == "assistant"
        await turn.end([Message.assistant("nice charts")])


async def test_a_file_of_a_result_answered_in_time_stays_where_it_is() -> None:
    async with Memory("memory://") as memory:
        await _two_calls_the_user_went_on_from(memory)
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("draw a third")])
        await turn.step([Message(role="assistant", parts=(ToolCallPart(tool_call_id="c3", tool_name="chart"),))])
        # c1 late, c3 in time, in one tool message: c1's file goes with c1, c3's stays with c3
        both = Message(role="tool", parts=(
            ToolResultPart(tool_call_id="c1", tool_name="chart", result="drawn one"), _png("one.png"),
            ToolResultPart(tool_call_id="c3", tool_name="chart", result="drawn three"), _png("three.png"),
        ))
        await turn.step([both])
        await turn.end([Message(role="assistant", parts=(TextPart(text="done"),))])
        stored = await memory.list_messages("t")
        with_c1 = [m for m in stored if any(r.tool_call_id == "c1" for r in m.tool_results)]
        with_c3 = [m for m in stored if any(r.tool_call_id == "c3" for r in m.tool_results)]
        assert len(with_c1) == 1 and _file_names(with_c1[0]) == ["one.png"]
        assert len(with_c3) == 1 and _file_names(with_c3[0]) == ["three.png"]
        assert sum(len(_file_names(m)) for m in stored) == 2
