"""Three or four turns of one thread at once, their models numbering tool calls from call_0.

Turn A calls, turn B begins (closing A's calls as unanswered), B calls, turn C begins (closing
B's). A's result for its call_1, arriving then, must take the place of A's "no result", not B's.

Before (helper 217): a late result took the place of the newest "no result" of its bare call id
(``selection.answer_late``): A's call_1 result landed after B's call, and B's own result then
found that place taken (answered once already) and was lost or refused. Now a turn's late result
goes first to the "no result" that follows one of the turn's own calls (``Turn._own_callers``).
"""

from __future__ import annotations

import itertools

import pytest

from obsmem import Memory, Message
from obsmem.om.selection import UNANSWERED
from obsmem.turn import Turn
from tests.integrity.test_concurrent_reused_call_ids_212 import calls, placed, refusals, results

pytestmark = pytest.mark.anyio


async def run_turns(memory: Memory, callers: str, quiet: str, order: list[tuple[str, str]]) -> None:
    """Begin a turn for each run of ``callers`` (each makes two calls, call_0 and call_1, right
    after it begins), then one for each of ``quiet`` (no calls); then ``order``: (run, "r0", "r1"
    or "r0+1") the run's results given late, the run's turn ended once both are in. Every turn
    ends; the stored thread must then hold each real result once, right after its own run's call."""
    turns: dict[str, Turn] = {}
    for run in callers + quiet:
        turns[run] = await memory.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user(f"{run}?")])
        assert refusals(turns[run].context.messages) == [], run
        if run in callers:
            await turns[run].step([calls(run)])
    given: set[str] = set()
    for run, what in order:
        indexes = [int(i) for i in what[1:].split("+")]
        context = await turns[run].step([results(run, *indexes)])
        given.update(f"{run}{i}" for i in indexes)
        if {f"{run}0", f"{run}1"} <= given:
            assert refusals(context.messages) == [], (run, what)
            await turns[run].end([Message.assistant(f"{run} done")])
    for run in quiet:
        await turns[run].end([Message.assistant(f"{run} done")])
    stored = await memory.list_messages("chat")
    assert refusals(stored) == []
    assert refusals((await memory.get_context("chat")).messages) == []
    assert placed(stored) == {run: {"call_0": f"{run}0", "call_1": f"{run}1"} for run in callers}
    texts = [part.result for m in stored for part in m.tool_results]
    assert sorted(t for t in texts if t != UNANSWERED) == sorted(f"{run}{i}" for run in callers for i in "01")


async def every_order(callers: str, quiet: str, orders: list[list[tuple[str, str]]]) -> None:
    failures: list[str] = []
    for order in orders:
        async with Memory("memory://") as memory:
            try:
                await run_turns(memory, callers, quiet, order)
            except Exception as exc:  # noqa: BLE001 - every order that fails is listed
                steps = " ".join(f"{r}:{w}" for r, w in order)
                failures.append(f"{steps}: {type(exc).__name__}: {exc}"[:300])
    assert failures == [], f"{len(failures)}/{len(orders)} orders failed:\n" + "\n".join(failures[:10])


def one_by_one(callers: str, *, backwards: bool = False) -> list[list[tuple[str, str]]]:
    """Every order of the runs' results, each given alone (``backwards``: only those where each
    run's call_1 result comes before its call_0 one)."""
    events = [(run, f"r{i}") for run in callers for i in "01"]
    orders = [list(order) for order in itertools.permutations(events)]
    if backwards:
        orders = [o for o in orders if all(o.index((run, "r1")) < o.index((run, "r0")) for run in callers)]
    return orders


async def test_three_turns_every_order_of_the_late_results() -> None:
    """A and B called; C began (B's calls closed, as A's were when B began)."""
    await every_order("AB", "C", one_by_one("AB"))


async def test_four_turns_every_order_of_the_late_results() -> None:
    """A, B and C called; D began. Each run's results given together, in every order of the runs,
    and given one by one, in every order where each run's call_1 result comes first."""
    together = [[(run, "r0+1") for run in runs] for runs in itertools.permutations("ABC")]
    await every_order("ABC", "D", together + one_by_one("ABC", backwards=True))


async def test_three_turns_on_every_store(memory: Memory) -> None:
    """The reproduction: A's call_1 result first, then the others."""
    await run_turns(memory, "AB", "C", [("A", "r1"), ("B", "r1"), ("A", "r0"), ("B", "r0")])


async def test_four_turns_on_every_store(memory: Memory) -> None:
    await run_turns(memory, "ABC", "D", [("A", "r1"), ("C", "r0+1"), ("B", "r0"), ("A", "r0"), ("B", "r1")])


async def test_three_turns_the_last_still_calling(memory: Memory) -> None:
    """C's own call_1 still waits when A's call_1 result comes: A's result goes to A's call,
    C's context and C's own results are untouched."""
    turns: dict[str, Turn] = {}
    for run in "ABC":
        turns[run] = await memory.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user(f"{run}?")])
        await turns[run].step([calls(run)])
    for run, index in [("A", 1), ("C", 0), ("B", 1), ("A", 0), ("C", 1), ("B", 0)]:
        context = await turns[run].step([results(run, index)])
    assert refusals(context.messages) == []
    for run in "ABC":
        await turns[run].end([Message.assistant(f"{run} done")])
    stored = await memory.list_messages("chat")
    assert refusals(stored) == []
    assert placed(stored) == {run: {"call_0": f"{run}0", "call_1": f"{run}1"} for run in "ABC"}


async def test_a_resumed_turn_answers_its_own_closed_calls(memory: Memory) -> None:
    """A continued elsewhere (resume_turn with since_seq) after C began: its late results go
    after its own calls, closed when B began, not after B's (closed when C began)."""
    turns: dict[str, Turn] = {}
    for run in "ABC":
        turns[run] = await memory.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user(f"{run}?")])
        if run != "C":
            await turns[run].step([calls(run)])
    began = turns["A"].began_seq
    assert began is not None
    turns["A"] = await memory.resume_turn(thread_id="chat", since_seq=began)
    assert refusals(turns["A"].context.messages) == []
    await turns["A"].step([results("A", 1)])
    context = await turns["A"].step([results("A", 0)])
    assert refusals(context.messages) == []
    await turns["B"].step([results("B", 1)])
    await turns["B"].step([results("B", 0)])
    for run in "ABC":
        await turns[run].end([Message.assistant(f"{run} done")])
    stored = await memory.list_messages("chat")
    assert refusals(stored) == []
    assert placed(stored) == {run: {"call_0": f"{run}0", "call_1": f"{run}1"} for run in "AB"}
