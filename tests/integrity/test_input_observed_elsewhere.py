"""A turn's input stays in its context when another process observes it first.

Found by a hostile review on PostgreSQL (6 processes × 40 turns on one thread): 7 turns got a
context without their own input. Another process's turn began right after the input was saved
and observed it (to that turn it is just an older message); the turn then built its context from
what was stored, where the input was observed, and put it back only when it was at most a tenth
of ``message_tokens`` (the rule for a question at a tool loop's later steps). The model never saw
a longer input. The README: "The input of the current turn (and the newest user message in any
case) is never observed away before the model has seen it: it stays raw in this step's context".

Here two ``Memory`` objects on one SQLite file stand for the two processes; the other one's turns
run right after this turn's save is committed, before this turn builds its context, and observe
past its input. On main both cases failed: the context held only the other process's messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(
    observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=100_000),
)
LONG_INPUT = (
    "Here is the incident report: the Lisbon warehouse lost power at 03:10, the backup generator "
    "failed to start, and the cold room reached 9 degrees by 04:00; the night manager moved the "
    "vaccines to the Porto truck at 04:20. Which shipments are affected?"
)


def _after_save(memory: Memory, then: Callable[[], Awaitable[None]]) -> None:
    """Run ``then`` once each save of ``memory`` has committed, before the save returns."""
    store: Any = memory.store
    save = store.save_messages_marked_early

    async def saved_then(*args: Any, **kwargs: Any) -> Any:
        rows, before, after, commit = await save(*args, **kwargs)
        await commit
        await then()
        return rows, before, after, commit

    store.save_messages_marked_early = saved_then


def _other_process(other: Memory, fired: list[str]) -> Callable[[], Awaitable[None]]:
    """The other process's turns, once: enough that its observation passes this turn's input."""

    async def turns() -> None:
        if fired:
            return
        fired.append("x")
        for k in range(6):
            turn = await other.begin_turn(
                thread_id="t", resource_id="u", messages=[Message.user(f"Also {k}: when is the audit? " * 3)]
            )
            await turn.end([Message.assistant("At nine.")])

    return turns


async def _history(memory: Memory, turns: int) -> None:
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id="t", resource_id="u", messages=[Message.user(f"note {i}: the pallet count is {i * 3}")]
        )
        await turn.end([Message.assistant(f"noted {i}")])


@pytest.mark.parametrize("where", ["begin_turn", "step"])
async def test_the_input_is_in_the_context_when_another_process_observed_it(tmp_path: Path, where: str) -> None:
    path = f"sqlite:///{tmp_path / 'm.db'}"
    async with Memory(path, config=CONFIG) as mine, Memory(path, config=CONFIG) as other:
        await _history(mine, 20)
        fired: list[str] = []
        other_process_turn = _other_process(other, fired)

        if where == "begin_turn":
            _after_save(mine, other_process_turn)
            turn = await mine.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(LONG_INPUT)])
            shown = [m.text for m in turn.context.raw_messages]
            assert fired, "the other process's turn ran"
            assert LONG_INPUT in shown, f"the turn's own input is not in its context: {shown}"
        else:
            turn = await mine.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Check the report.")])
            _after_save(mine, other_process_turn)
            context = await turn.step([Message.assistant(LONG_INPUT)])
            shown = [m.text for m in context.raw_messages]
            assert fired, "the other process's turn ran"
            assert LONG_INPUT in shown, f"the step's own messages are not in its context: {shown}"
        stored = {m.text: m.seq for m in await mine.list_messages("t")}
        record = await mine.get_record("t")
        assert record is not None and record.cursor("t") > (stored[LONG_INPUT] or 0), "the other process observed it"
        await turn.end()


async def test_a_tool_result_observed_elsewhere_never_comes_back_without_its_call(tmp_path: Path) -> None:
    """The call was saved at the step before; another process observed the call and its result
    once the result was stored. The result alone in front of the raw tail would be a result
    without its call (refused by every provider): the pair's observation stands in for it."""
    from obsmem import ToolCallPart, ToolResultPart

    path = f"sqlite:///{tmp_path / 'm.db'}"
    async with Memory(path, config=CONFIG) as mine, Memory(path, config=CONFIG) as other:
        await _history(mine, 20)
        fired: list[str] = []
        other_process_turns = _other_process(other, fired)

        turn = await mine.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Look up the report.")])
        call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "r"}),))
        await turn.step([call])
        _after_save(mine, other_process_turns)
        result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="lookup", result=LONG_INPUT),))
        context = await turn.step([result])
        assert fired
        calls_before: set[str] = set()
        for message in context.messages:
            for part in message.tool_results:
                assert part.tool_call_id in calls_before, f"a tool result without its call: {part.tool_call_id}"
            calls_before |= {c.tool_call_id for c in message.tool_calls}
        await turn.end()


def _call(cid: str) -> Message:
    from obsmem import ToolCallPart

    return Message(role="assistant", parts=(ToolCallPart(tool_call_id=cid, tool_name="t"),))


def _result(cid: str) -> Message:
    from obsmem import ToolResultPart

    return Message(role="tool", parts=(ToolResultPart(tool_call_id=cid, tool_name="t", result="ok"),))


@pytest.mark.parametrize(
    ("messages", "context", "kept"),
    [
        (["text"], [], ["text"]),
        (["call:a", "result:a", "text"], [], ["call:a", "result:a", "text"]),
        (["result:a", "text"], ["call:a"], ["result:a", "text"]),  # its call is shown already
        (["result:a", "text"], [], ["text"]),  # its call is nowhere: the result stays out
        (["call:a", "text"], [], ["text"]),  # a call without its result stays out too
        (["call:a", "result:a", "result:b"], [], []),  # any broken pair: every tool message stays out
    ],
)
def test_re_shown_messages_keep_whole_pairs(messages: list[str], context: list[str], kept: list[str]) -> None:
    from obsmem.turn import _whole_pairs

    def made(spec: str) -> Message:
        kind, _, cid = spec.partition(":")
        return _call(cid) if kind == "call" else _result(cid) if kind == "result" else Message.user(spec)

    built = [made(s) for s in messages]
    out = _whole_pairs(built, [made(s) for s in context])
    assert [messages[built.index(m)] for m in out] == kept
