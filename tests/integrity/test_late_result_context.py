"""A tool result that comes after the user went on (an approval given late) takes the place of
the "no result" answer obsmem stored for its call. The turn that delivers it must show it: its
model is the one that needs to know the approved tool ran. Before, that turn's context still
showed "No result: … (the tool may not have run)" from the window read before the rewrite (the
store held the real result; only the next turn showed it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def _shown(messages: list[Message]) -> list[tuple[str, list[object]]]:
    return [(m.role, [getattr(p, "result", getattr(p, "text", None)) for p in m.parts]) for m in messages]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_turn_that_delivers_a_late_result_shows_it(tmp_path: Path, kind: str) -> None:
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'memory.db'}"
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("delete old.log")])
        await turn.end([Message(role="assistant", parts=(ToolCallPart(tool_call_id="d1", tool_name="rm", args={}),))])
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("wait, first list it")])
        await turn.end([Message.assistant("It is 2 MB.")])
        late = Message(role="tool", parts=(ToolResultPart(tool_call_id="d1", tool_name="rm", result="deleted"),))
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[late])
        stored = _shown(await memory.list_messages("h"))
        assert ("tool", ["deleted"]) in stored, "the store holds the real result in the answer's place"
        shown = _shown(turn.context.messages)
        assert ("tool", ["deleted"]) in shown, shown
        assert not any("No result" in str(parts) for _, parts in shown), shown
        await turn.end([Message.assistant("Done: old.log is deleted.")])
        following = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("thanks")])
        assert ("tool", ["deleted"]) in _shown(following.context.messages)
        await following.end()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_step_that_delivers_a_late_result_shows_it(tmp_path: Path, kind: str) -> None:
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'memory.db'}"
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("delete old.log")])
        await turn.end([Message(role="assistant", parts=(ToolCallPart(tool_call_id="d1", tool_name="rm", args={}),))])
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("did it go?")])
        late = Message(role="tool", parts=(ToolResultPart(tool_call_id="d1", tool_name="rm", result="deleted"),))
        context = await turn.step([late])
        shown = _shown(context.messages)
        assert ("tool", ["deleted"]) in shown, shown
        assert not any("No result" in str(parts) for _, parts in shown), shown
        assert shown[-1] == ("user", ["did it go?"]) or ("user", ["did it go?"]) in shown
        await turn.end([Message.assistant("Yes, old.log is deleted.")])
