"""The offline observer reads a batch's tool runs in work linear in their number.

A model may answer with hundreds or thousands of parallel calls in one message (a crawler, a
batch lookup). A call is never separated from its result, so the engine hands the observer one
request holding the call message and every result. The observer looked for an earlier identical
run (same tool, arguments and result: one line "ran it 3 times") by scanning every run it had so
far, once per result: quadratic in the calls. And each reply that said what the turn's lookups
found marked them folded by scanning every run of the batch again: quadratic in a long tool
loop's steps.

Work is counted, not timed (:mod:`tests.integrity.work_count`): 4× the calls must cost under 8×
the work (linear ≈ 4×, quadratic ≈ 16×).
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.om.offline import OfflineObserver
from obsmem.om.offline import observer as observer_module
from obsmem.om.protocols import ObservationRequest
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

from tests.integrity.work_count import GROWTH_BOUND, work

START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


def _parallel(k: int) -> list[Message]:
    """A question, one message of ``k`` parallel calls, one result message per call, a reply."""
    at = iter(START + timedelta(seconds=i) for i in range(k + 3))
    calls = tuple(ToolCallPart(tool_call_id=f"c{i}", tool_name="lookup", args={"sku": f"A{i}"}) for i in range(k))
    return [
        Message(role="user", parts=(TextPart(text="Look every item up."),), created_at=next(at)),
        Message(role="assistant", parts=calls, created_at=next(at)),
        *(
            Message(
                role="tool",
                parts=(ToolResultPart(tool_call_id=f"c{i}", tool_name="lookup", result=f"in stock: {i}"),),
                created_at=next(at),
            )
            for i in range(k)
        ),
        Message.assistant("All of them are checked.", created_at=next(at)),
    ]


def _loop(k: int) -> list[Message]:
    """A tool loop of ``k`` steps, each reply saying what the step before found and calling again."""
    at = iter(START + timedelta(seconds=i) for i in range(2 * k + 2))
    messages = [Message(role="user", parts=(TextPart(text="Check the shelves one by one."),), created_at=next(at))]
    for i in range(k):
        messages.append(Message(role="assistant", created_at=next(at), parts=(
            TextPart(text=f"Shelf {i} holds the item A{i} in stock."),
            ToolCallPart(tool_call_id=f"c{i}", tool_name="lookup", args={"shelf": i}),
        )))
        messages.append(Message(role="tool", created_at=next(at), parts=(
            ToolResultPart(tool_call_id=f"c{i}", tool_name="lookup", result=f"shelf {i}: item A{i}"),
        )))
    return messages


def _observe(messages: list[Message]) -> str:
    observations, *_ = OfflineObserver()._observe(ObservationRequest(messages=messages))
    return observations


def test_many_parallel_results_are_observed_in_linear_work() -> None:
    assert "Assistant ran lookup 30 times" in _observe(_parallel(30)[:-1])  # no reply: a line of its own
    assert "Assistant ran" not in _observe(_parallel(30)), "the reply says what they found: folded"
    growth = work(lambda _: _observe(_parallel(2000)), "") / work(lambda _: _observe(_parallel(500)), "")
    assert growth < GROWTH_BOUND, f"4x the parallel results took {growth:.1f}x the observer's work"


def test_repeated_runs_still_fold_into_one_line_with_a_count() -> None:
    """The lookup finds the run the scan found: the same call and result twice is one run."""
    messages = _parallel(3)[:-1]
    repeat = ToolCallPart(tool_call_id="again", tool_name="lookup", args={"sku": "A1"})
    messages[1] = messages[1].model_copy(update={"parts": (*messages[1].parts, repeat)})
    messages.append(Message(role="tool", created_at=messages[-1].created_at, parts=(
        ToolResultPart(tool_call_id="again", tool_name="lookup", result="in stock: 1"),
    )))
    observed = _observe(messages)
    assert "Assistant ran lookup 4 times:" in observed, observed
    assert "-> (sku=A1) -> in stock: 1 (ran 2 times)" in observed, observed
    assert "-> (sku=A0) -> in stock: 0\n" in observed, observed


def test_a_long_tool_loop_is_observed_in_linear_work() -> None:
    assert "Assistant ran lookup 4 times:" in _observe(_loop(4))
    growth = work(lambda _: _observe(_loop(1600)), "") / work(lambda _: _observe(_loop(400)), "")
    assert growth < GROWTH_BOUND, f"4x the tool loop's steps took {growth:.1f}x the observer's work"


def test_the_engine_hands_the_observer_every_parallel_result_in_one_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the observer's own work matters here: the batch is not cut between a call and its
    results, so a message of k calls reaches the observer as one request of k results."""
    monkeypatch.setenv("OBSMEM_OFFLINE_PROCESS", "0")
    seen: list[int] = []
    original = observer_module.OfflineObserver._observe

    def noted(self: OfflineObserver, request: ObservationRequest) -> Any:
        seen.append(sum(len(m.tool_results) for m in request.messages))
        return original(self, request)

    monkeypatch.setattr(observer_module.OfflineObserver, "_observe", noted)

    async def scenario() -> None:
        config = MemoryConfig(observation=ObservationConfig(message_tokens=1000, buffer_tokens=False))
        async with Memory("memory://", config=config) as memory:
            conversation = _parallel(600)
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=conversation[:1])
            await turn.step(conversation[1:2])
            await turn.step(conversation[2:-1])
            await turn.step(conversation[-1:])
            await turn.end()
            turn = await memory.begin_turn(thread_id="t", messages=[Message.user("Thanks.")])
            await turn.end()
            await memory.settled()

    assert os.environ["OBSMEM_OFFLINE_PROCESS"] == "0"
    asyncio.run(scenario())
    assert max(seen, default=0) == 600, seen
