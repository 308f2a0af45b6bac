"""An agent's tool loop: each step saves one tool call or one result, and the step's context
is counted (the window, the buffer plan, the context's sections) and hashed for its receipt.

Text messages kept their count and digest on themselves; tool calls and results with a dict or
list payload (nearly every real tool call: ``args`` is a dict) did not, so every boundary
dumped every call's arguments and every result of the window to JSON again, several times: a
step of a six-call agent loop took 16 ms (11 ms of CPU) where a text turn's boundary takes
about 1.5. What is counted here is that JSON work, per step, at two window sizes: it must not
grow with the tool exchanges already in the window (it did: linearly). No time is asserted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import obsmem.tokens
from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def _call(n: int) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(
        tool_call_id=f"call-{n}", tool_name="search",
        args={"query": f"hotels near station {n}", "max": 5, "filters": {"stars": [3, 4, 5]}},
    ),))


def _result(n: int) -> Message:
    return Message(role="tool", parts=(ToolResultPart(
        tool_call_id=f"call-{n}", tool_name="search",
        result={"items": [{"name": f"Hotel {i}", "price": 100 + i} for i in range(4)], "total": 4},
    ),))


class _Serializations:
    """Counts the JSON dumps obsmem makes of tool payloads: the token counter's and the
    receipts' (a part's ``model_dump_json``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        to_json = obsmem.tokens._to_json
        dump_json = BaseModel.model_dump_json

        def counted_to_json(value: Any, **kwargs: Any) -> str:
            self.count += 1
            return to_json(value, **kwargs)

        def counted_dump_json(model: BaseModel, **kwargs: Any) -> str:
            if isinstance(model, ToolCallPart | ToolResultPart):
                self.count += 1
            return dump_json(model, **kwargs)

        monkeypatch.setattr(obsmem.tokens, "_to_json", counted_to_json)
        monkeypatch.setattr(BaseModel, "model_dump_json", counted_dump_json)


async def _serializations_of_one_step(exchanges: int, monkeypatch: pytest.MonkeyPatch, url: str) -> int:
    """A turn with ``exchanges`` tool calls answered (one call, then its result, a step each),
    then one more call: the payload JSON dumps of that last step."""
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id="trip", resource_id="dana", messages=[Message.user("Find a hotel.")])
        for n in range(exchanges):
            await turn.step([_call(n)])
            await turn.step([_result(n)])
        with monkeypatch.context() as patch:
            counter = _Serializations(patch)
            context = await turn.step([_call(exchanges)])
            counted = counter.count
        # The step did its job: the whole loop is in the context, the new call last.
        assert context.messages[-1].parts[0].tool_call_id == f"call-{exchanges}"  # type: ignore[union-attr]
        assert sum(len(m.tool_results) for m in context.messages) == exchanges
        await turn.end([_result(exchanges), Message.assistant("Booked Hotel 0.")])
        return counted


async def test_a_tool_loop_step_does_not_dump_the_windows_tool_payloads_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    small = await _serializations_of_one_step(5, monkeypatch, f"sqlite:///{tmp_path / 'small.db'}")
    large = await _serializations_of_one_step(20, monkeypatch, f"sqlite:///{tmp_path / 'large.db'}")
    # Only the new call is dumped (a few times at most: counted, hashed); the 40 tool messages
    # already in the window are not dumped again.
    assert large == small, (small, large)
    assert small <= 4, small
