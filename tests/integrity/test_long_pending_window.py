"""A thread whose memory is far behind: a turn that goes on without its memory work cuts the raw
window in work linear in the window (the project rule: no input makes a code path superlinear).

The window grows past any threshold when memory cannot keep up: a provider down for hours, or a
long history imported at once. A boundary that stops waiting for that work (``max_turn_wait``)
hands the actor the stored window cut to the engine's limit, choosing the smallest cut that fits
among every place the window may be cut. Before the fix each candidate cut summed all the
message counts before it again: 16,000 pending messages took 0.6 s of the event loop per turn,
and 4× the messages about 11× the time. In resource scope, another thread far behind that joins a
cycle had the same flaw (the longest prefix that fits the batch was found by summing each prefix).

Work is counted, not timed (:mod:`tests.integrity.work_count`). The sums happen inside ``sum()``,
one C call the trace does not see, so the counter here is a :class:`TokenCounter` whose counts
are an ``int`` that adds through Python (a user's own counter, passed to ``Memory(counter=…)``):
every addition of two counts is one traced call, wherever it happens.
"""

from __future__ import annotations

import asyncio
from typing import Any

from obsmem import Memory, MemoryConfig
from obsmem.models.testing import FunctionModel
from obsmem.om.selection import choose_other_threads
from obsmem.tokens import TokenCounter
from obsmem.types import Message

from tests.integrity.work_count import GROWTH_BOUND, async_work, work


class _Count(int):
    """A token count whose additions are traced calls."""

    def __add__(self, other: Any) -> int:
        return int(self) + int(other)

    def __radd__(self, other: Any) -> int:
        return int(other) + int(self)


class TracedCounter(TokenCounter):
    def count_message(self, message: Message) -> int:
        return _Count(super().count_message(message))


def _history(size: int) -> list[Message]:
    return [
        Message.user(f"Question {i}: what about the {i}th invoice?")
        if i % 2 == 0
        else Message.assistant(f"The {i}th invoice is settled, nothing more to do.")
        for i in range(size)
    ]


def _turn_behind(size: int) -> tuple[int, int]:
    """Begin a turn on a thread ``size`` messages behind, its observer held (the work never ends
    within the bound): the work of ``begin_turn`` on the loop's thread, and how many raw
    messages its context left out."""

    async def held(messages: list[Message], settings: object) -> str:
        await asyncio.Event().wait()  # a provider that never answers
        return ""

    async def scenario() -> tuple[int, int]:
        config = MemoryConfig().replace(observation={"message_tokens": 500, "buffer_tokens": False})
        memory = Memory(
            "memory://", config=config, observer=FunctionModel(held), reflector="offline",
            counter=TracedCounter(), max_turn_wait=0.05,
        )
        try:
            await memory.create_thread("t1", resource_id="u1")
            await memory.save_messages("t1", _history(size))
            question = Message.user("And the newest invoice?")
            events, turn = await async_work(
                memory.begin_turn(thread_id="t1", resource_id="u1", messages=[question])
            )
            assert turn.context.raw_messages[-1].id == question.id, "the question is in the context"
            return events, turn.trimmed
        finally:
            await memory.aclose(cancel=True)

    return asyncio.run(scenario())


def test_a_turn_far_behind_cuts_its_window_in_linear_work() -> None:
    size = 1000
    _turn_behind(size // 4)  # warm-up: imports and first-call caches are not the window's work
    small, trimmed_small = _turn_behind(size)
    large, trimmed_large = _turn_behind(4 * size)
    assert trimmed_large > trimmed_small > 0
    growth = large / small
    assert growth < GROWTH_BOUND, f"4x the pending messages took {growth:.1f}x the work"


def test_the_traced_count_sees_a_sum_over_each_prefix() -> None:
    """The counter's additions are traced: summing every prefix (quadratic) is seen as such."""

    def prefixes(text: str) -> None:
        counts = [_Count(1) for _ in text]
        for cut in range(len(counts)):
            sum(counts[:cut])

    def once(text: str) -> None:
        sum(_Count(1) for _ in text)

    assert work(prefixes, "x" * 800) / work(prefixes, "x" * 200) > GROWTH_BOUND
    assert work(once, "x" * 800) / work(once, "x" * 200) < GROWTH_BOUND


def _other_threads(size: str) -> object:
    """Resource scope with sharing on: another thread ``len(size)`` messages behind offers its
    prefix to a cycle with room for about half of it."""
    messages = [
        m.model_copy(update={"seq": i + 1, "thread_id": "t2"})
        for i, m in enumerate(_history(len(size)) + [Message.user("The newest question")])
    ]
    counts: list[int] = [_Count(10) for _ in messages]
    return choose_other_threads(
        {"t2": messages}, {"t2": counts}, minimum=1, max_tokens=5 * len(messages)
    )


def test_another_thread_far_behind_joins_a_cycle_in_linear_work() -> None:
    """The longest prefix of another thread that fits the room is found in one pass over it."""
    chosen = _other_threads("x" * 400)
    assert isinstance(chosen, list) and len(chosen) == 1 and 0 < len(chosen[0].messages) < 401
    growth = work(_other_threads, "x" * 1600) / work(_other_threads, "x" * 400)
    assert growth < GROWTH_BOUND, f"4x the other thread's messages took {growth:.1f}x the work"
