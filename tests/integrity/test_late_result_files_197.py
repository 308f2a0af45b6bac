"""A late tool result (it came after the user went on) takes the place of its "no result" answer,
and the files after it in its tool message (a screenshot) go with it (om.selection.answer_late).
The same result sent twice in one call (a framework delivering it again under a new message id)
is taken once: its second copy's files were added to the answer too, the screenshot stored twice
and sent to the model twice at every later turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import FilePart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

SHOT = FilePart(media_type="image/png", url="https://files.example/shot.png")


def _late() -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id="s1", tool_name="screenshot", result="taken"), SHOT))


async def _unanswered(memory: Memory) -> None:
    turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("take a screenshot")])
    await turn.end([Message(role="assistant", parts=(ToolCallPart(tool_call_id="s1", tool_name="screenshot", args={}),))])
    turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("never mind")])
    await turn.end([Message.assistant("OK.")])


def _files(messages: list[Message]) -> list[tuple[str, str | None]]:
    return [(m.role, p.url) for m in messages for p in m.parts if isinstance(p, FilePart)]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_same_late_result_twice_in_one_call_brings_its_file_once(tmp_path: Path, kind: str) -> None:
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await _unanswered(memory)
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[_late(), _late()])
        assert _files(turn.context.messages) == [("tool", SHOT.url)]
        await turn.end([Message.assistant("Here it is.")])
        stored = await memory.list_messages("h")
        assert _files(stored) == [("tool", SHOT.url)]
        assert [p.result for m in stored for p in m.tool_results] == ["taken"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_late_result_sent_again_next_turn_brings_nothing(tmp_path: Path, kind: str) -> None:
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await _unanswered(memory)
        late = _late()
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[late])
        await turn.end([Message.assistant("Here it is.")])
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[late, Message.user("thanks")])
        await turn.end([Message.assistant("You're welcome.")])
        stored = await memory.list_messages("h")
        assert _files(stored) == [("tool", SHOT.url)]
        assert [p.result for m in stored for p in m.tool_results] == ["taken"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_file_before_the_late_result_goes_with_it(tmp_path: Path, kind: str) -> None:
    # A tool message's files are its results' wherever they stand (selection.is_boundary): a file
    # before the result stayed behind in a tool message of its own at the thread's end.
    before = FilePart(media_type="image/png", url="https://files.example/before.png")
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await _unanswered(memory)
        late = Message(role="tool", parts=(before, *_late().parts))
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[late])
        await turn.end([Message.assistant("Here it is.")])
        stored = await memory.list_messages("h")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant", "assistant"]
        assert _files(stored) == [("tool", before.url), ("tool", SHOT.url)]
        assert [p.type for p in stored[2].parts] == ["tool-result", "file", "file"]
