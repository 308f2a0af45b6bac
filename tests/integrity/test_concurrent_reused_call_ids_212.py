"""Two turns of one thread at once whose models number their tool calls from call_0 each time.

Many local model servers (and some gateways) give each response's calls the ids call_0, call_1,
... again. Two turns running at the same time (a second message sent before the first was
answered, two tabs) then hold calls with the same ids. Since c3b43a1 a framework saves each tool
result as its tool returns, so the thread can hold one turn's step while its other calls still
run, when the other turn goes on.

Before (helper 212): a turn knew its own calls by their bare ids. Turn A ending while turn B's
call_1 still ran kept B's call_1 open as if it were A's own, and A's end was refused
(InvalidInputError "comes while tool calls ['call_1'] still wait for their results"); A's
result for its call_1 (closed when B began) answered B's waiting call_1 instead, and B's result
then went to A's call: the two results swapped, silently; A's step context ended with B's
waiting call (a call without a result, refused by every provider).

Now a waiting call is the turn's own only when the message that made it is one of the turn's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from obsmem import Memory, Message
from obsmem.convert.anthropic import to_anthropic
from obsmem.convert.openai import to_openai
from obsmem.errors import InvalidInputError
from obsmem.om.selection import UNANSWERED
from obsmem.turn import Turn
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def calls(run: str) -> Message:
    """The model's response of ``run``: two calls, numbered from call_0 as a local server does."""
    return Message(role="assistant", parts=tuple(
        ToolCallPart(tool_call_id=f"call_{i}", tool_name="look", args={"run": run}) for i in range(2)
    ))  # fmt: skip


def results(run: str, *indexes: int) -> Message:
    return Message(role="tool", parts=tuple(
        ToolResultPart(tool_call_id=f"call_{i}", tool_name="look", result=f"{run}{i}") for i in indexes
    ))  # fmt: skip


def openai_refusals(messages: Sequence[Message]) -> list[str]:
    """What Chat Completions refuses in ``messages`` (as obsmem converts them): a tool message
    that answers no call of the assistant message before it (or one answered already), and an
    assistant message's call left without its tool message before the next message."""
    bad: list[str] = []
    waiting: set[str] = set()
    for i, entry in enumerate(to_openai(messages)):
        if entry["role"] == "tool":
            if entry["tool_call_id"] not in waiting:
                bad.append(f"{i}: result for {entry['tool_call_id']!r}, which is not waiting")
            waiting.discard(entry["tool_call_id"])
            continue
        if waiting:
            bad.append(f"{i} ({entry['role']}) while {sorted(waiting)} wait")
        ids = [c["id"] for c in entry.get("tool_calls") or ()]
        if len(ids) != len(set(ids)):
            bad.append(f"{i}: the same call id twice in one message: {ids}")
        waiting = set(ids)
    if waiting:
        bad.append(f"never answered: {sorted(waiting)}")
    return bad


def anthropic_refusals(messages: Sequence[Message]) -> list[str]:
    """What the Messages API refuses: the tool_result blocks of a user message must answer the
    tool_use blocks of the assistant message right before it, each exactly once."""
    bad: list[str] = []
    _, turns = to_anthropic(messages)
    called: list[str] = []
    for i, entry in enumerate(turns):
        content = entry["content"] if isinstance(entry["content"], list) else []
        answered = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        if entry["role"] == "user" and sorted(answered) != sorted(called):
            bad.append(f"{i}: results {answered} after calls {called}")
        called = [b["id"] for b in content if b.get("type") == "tool_use" and entry["role"] == "assistant"]
    if called:
        bad.append(f"never answered: {called}")
    return bad


def refusals(messages: Sequence[Message]) -> list[str]:
    return openai_refusals(messages) + anthropic_refusals(messages)


def placed(stored: Sequence[Message]) -> dict[str, dict[str, object]]:
    """Each run's calls (by the ``run`` argument of the message that made them) and the answer
    stored for each, read by position: the tool messages right after that message."""
    out: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    for message in stored:
        if message.role == "tool" and current is not None:
            for part in message.tool_results:
                assert part.tool_call_id not in current or current[part.tool_call_id] is None, part
                current[part.tool_call_id] = part.result
            continue
        current = None
        if message.tool_calls:
            current = out[str(message.tool_calls[0].args["run"])] = dict.fromkeys(
                c.tool_call_id for c in message.tool_calls
            )
    return out


# One turn's boundaries after its begin, by name; "r0+1": both results in one tool message.
ONE_BY_ONE = ["call", "r0", "r1", "end"]
BACKWARDS = ["call", "r1", "r0", "end"]
TOGETHER = ["call", "r0+1", "end"]


async def act(
    memory: Memory, turns: dict[str, Turn], run: str, what: str, given: set[str] | None = None
) -> None:
    """Run ``what`` on turn ``run``; once its model is to be called again (begun, or every result
    of its step given: ``given`` holds the results given so far), its context must be valid."""
    given = set() if given is None else given
    turn = turns.get(run)
    if what == "begin":
        question = Message.user(f"{run}?")
        turns[run] = await memory.begin_turn(thread_id="chat", resource_id="u", messages=[question])
    elif what == "call":
        assert turn is not None
        await turn.step([calls(run)])
    elif what == "end":
        assert turn is not None
        await turn.end([Message.assistant(f"{run} done")])
    else:
        assert turn is not None
        await turn.step([results(run, *(int(i) for i in what[1:].split("+")))])
    given.update(f"{run}{i}" for i in what[1:].split("+") if what.startswith("r"))
    if what == "begin" or given >= {f"{run}0", f"{run}1"} and what != "end":
        assert refusals(turns[run].context.messages) == [], (run, what)


def orders(a: list[str], b: list[str]) -> list[list[tuple[str, str]]]:
    """Every interleaving of A's and B's boundaries, A begun first."""
    out = []
    steps = len(a) + len(b)
    for slots in itertools.combinations(range(steps), len(a)):
        ia, ib = iter(a), iter(b)
        out.append([("A", next(ia)) if i in slots else ("B", next(ib)) for i in range(steps)])
    return out


async def run_order(memory: Memory, order: list[tuple[str, str]]) -> None:
    turns: dict[str, Turn] = {}
    given: set[str] = set()
    await act(memory, turns, "A", "begin")
    for run, what in order:
        await act(memory, turns, run, what, given)
    stored = await memory.list_messages("chat")
    assert refusals(stored) == []
    assert refusals((await memory.get_context("chat")).messages) == []
    # Every real result is stored once, right after the call its own run made; no call of
    # either run is answered by the other's result.
    answers = placed(stored)
    for run in "AB":
        assert answers[run] == {"call_0": f"{run}0", "call_1": f"{run}1"}, (run, answers)
    texts = [part.result for m in stored for part in m.tool_results]
    assert sorted(t for t in texts if t != UNANSWERED) == ["A0", "A1", "B0", "B1"]


@pytest.mark.parametrize(("a", "b"), [
    (ONE_BY_ONE, ["begin", *ONE_BY_ONE]),
    (TOGETHER, ["begin", *ONE_BY_ONE]),
    (BACKWARDS, ["begin", *TOGETHER]),
], ids=["one-by-one", "a-together", "a-backwards"])  # fmt: skip
async def test_every_interleaving_keeps_each_result_after_its_own_call(a: list[str], b: list[str]) -> None:
    failures: list[str] = []
    for order in orders(a, b):
        async with Memory("memory://") as memory:
            try:
                await run_order(memory, order)
            except Exception as exc:  # noqa: BLE001 - every interleaving that fails is listed
                steps = " ".join(f"{r}:{w}" for r, w in order)
                failures.append(f"{steps}: {type(exc).__name__}: {exc}"[:300])
    total = len(orders(a, b))
    assert failures == [], f"{len(failures)}/{total} interleavings failed:\n" + "\n".join(failures[:10])


async def test_agent_framework_order_on_every_store(memory: Memory) -> None:
    """The order the Agent Framework report hit: B's first result stored while its second tool
    still runs, then A's results (both at once) and A's end."""
    await run_order(memory, [
        ("A", "call"), ("B", "begin"), ("B", "call"), ("B", "r0"), ("A", "r0+1"), ("A", "end"),
        ("B", "r1"), ("B", "end"),
    ])  # fmt: skip


async def test_results_one_by_one_are_not_swapped_on_every_store(memory: Memory) -> None:
    """A's call_1 result while B's call_1 waits answers A's call (closed when B began), not B's."""
    await run_order(memory, [
        ("A", "call"), ("B", "begin"), ("B", "call"), ("B", "r0"), ("A", "r0"), ("A", "r1"), ("A", "end"),
        ("B", "r1"), ("B", "end"),
    ])  # fmt: skip


async def test_a_resumed_turn_knows_its_calls_from_the_others(memory: Memory) -> None:
    """A turn continued elsewhere (resume_turn with since_seq) while the other turn's call_1,
    the same id as one of its own, still runs."""
    turns: dict[str, Turn] = {}
    await act(memory, turns, "A", "begin")
    await act(memory, turns, "A", "call")
    await act(memory, turns, "B", "begin")
    await act(memory, turns, "B", "call")
    await act(memory, turns, "B", "r0")
    began = turns["A"].began_seq
    assert began is not None
    turns["A"] = await memory.resume_turn(thread_id="chat", since_seq=began)
    assert refusals(turns["A"].context.messages) == []
    given = {"B0"}
    for run, what in [("A", "r1"), ("A", "r0"), ("A", "end"), ("B", "r1"), ("B", "end")]:
        await act(memory, turns, run, what, given)
    stored = await memory.list_messages("chat")
    assert refusals(stored) == []
    assert placed(stored) == {run: {"call_0": f"{run}0", "call_1": f"{run}1"} for run in "AB"}


async def test_the_turns_own_waiting_call_is_still_refused_past(memory: Memory) -> None:
    """The other turn's call_1 waited under the same id once; this turn's own call_1, made
    after, is its model's to answer: talking past it is refused as ever, nothing stored."""
    turns: dict[str, Turn] = {}
    for run, what in [("A", "begin"), ("A", "call"), ("B", "begin"), ("B", "call"), ("B", "r0"),
                      ("A", "r0+1"), ("A", "call")]:  # fmt: skip
        await act(memory, turns, run, what)
    count = len(await memory.list_messages("chat"))
    with pytest.raises(InvalidInputError, match="still wait for their results") as caught:
        await turns["A"].step([Message.assistant("never mind the tools")])
    assert getattr(caught.value, "input_saved", None) is False
    assert len(await memory.list_messages("chat")) == count
