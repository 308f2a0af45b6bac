"""Many parallel tool calls in one message cost work linear in their number (the project rule:
no input makes a code path superlinear).

A model may emit hundreds of parallel calls in one message (a batch tool, a crawler fanning out).
Seen from the user's side, two paths were quadratic in that number before the fix:

* a turn whose input carries the calls and then one result message per call: closing the calls
  still waiting at each message rebuilt the whole waiting list (``close_waiting_calls``, the rule
  a turn's start applies to its input);
* the approvals of calls the user went past, given late in one message: each result rebuilt the
  whole closing message, k parts each time (``answer_late``).

And one more, found beside them: cutting thousands of pending messages into observer batches
(``observation_batches``) scanned every cut again for each batch.

Work is counted, not timed (:mod:`tests.integrity.work_count`): 4× the calls must cost under 8×
the work (linear ≈ 4×, quadratic ≈ 16×).
"""

from __future__ import annotations

import asyncio

from obsmem import Memory, Message
from obsmem.om.selection import close_waiting_calls, observation_batches
from obsmem.types import ToolCallPart, ToolResultPart

from tests.integrity.work_count import GROWTH_BOUND, async_work, work


def _calls(k: int) -> Message:
    return Message(
        role="assistant",
        parts=tuple(ToolCallPart(tool_call_id=f"c{i}", tool_name="fetch", args={"page": i}) for i in range(k)),
    )


def _result(i: int, text: str = "ok") -> ToolResultPart:
    return ToolResultPart(tool_call_id=f"c{i}", tool_name="fetch", result=text)


def _closing(size: str) -> list[Message]:
    """The rule a turn's start applies to its input (``close_waiting_calls``): k calls, then one
    result message per call, then a new question. (Seen whole through ``begin_turn`` the
    quadratic part hides behind the saves below several thousand calls; the rule alone shows it.)"""
    k = len(size)
    new = [_calls(k), *(Message(role="tool", parts=(_result(i),)) for i in range(k)), Message.user("Sum up.")]
    return close_waiting_calls([Message.user("Fetch every page.")], new)


def _late_approvals(k: int) -> int:
    """k calls left waiting, the user went on (one closing message answers them as unanswered),
    then every result arrives late, in one message."""

    async def scenario() -> int:
        async with Memory("memory://") as memory:
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Fetch all.")])
            await turn.step([_calls(k)])
            await turn.end()
            turn = await memory.begin_turn(thread_id="t", messages=[Message.user("Never mind.")])
            await turn.end()
            late = Message(role="tool", parts=tuple(_result(i, f"page {i}") for i in range(k)))
            events, turn = await async_work(memory.begin_turn(thread_id="t", messages=[late]))
            await turn.end()
            stored = await memory.list_messages("t")
            closing = stored[2]
            assert [r.result for r in closing.tool_results] == [f"page {i}" for i in range(k)], "in place"
            return events

    return asyncio.run(scenario())


def test_a_turn_with_many_parallel_results_is_linear_in_their_number() -> None:
    assert len(_closing("x" * 20)) == 22, "every call answered: nothing to close"
    growth = work(_closing, "x" * 2000) / work(_closing, "x" * 500)
    assert growth < GROWTH_BOUND, f"4x the parallel calls took {growth:.1f}x the work"


def test_many_late_approvals_are_put_in_place_in_linear_work() -> None:
    _late_approvals(30)
    growth = _late_approvals(600) / _late_approvals(150)
    assert growth < GROWTH_BOUND, f"4x the late results took {growth:.1f}x the work"


def _batches(size: str) -> object:
    """Thousands of pending messages, 250 tokens each, cut into 10,000-token observer batches."""
    n = len(size)
    return observation_batches(list(range(1, n + 1)), [250] * n, n, 10_000)


def test_observer_batches_over_a_long_window_are_linear_in_its_length() -> None:
    assert _batches("x" * 100) == [(0, 40), (40, 80), (80, 100)]
    growth = work(_batches, "x" * 8000) / work(_batches, "x" * 2000)
    assert growth < GROWTH_BOUND, f"4x the messages took {growth:.1f}x the work"
