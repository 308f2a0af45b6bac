"""A tool's deeply nested JSON does not stop the offline observer for good.

Found by feeding ``Memory("memory://")`` tool results and arguments that are JSON text nested
a few hundred to a few thousand levels deep (a serialised tree, a generated fixture, a hostile
tool): the offline observer parsed such text and walked nested lists recursively, so
``json.loads`` or the walk raised ``RecursionError``, which nothing caught. The observation
failed (``ObservationError`` under the default policy), the messages stayed pending, and every
later cycle failed on the same message again: nothing of the thread was observed any more.
Text too deep to parse is read as text now, and nested lists are read to a bounded depth (below
which nothing shows in a compact result anyway).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)


def _lists(depth: int) -> str:
    return "[" * depth + '"ORD-77"' + "]" * depth


def _objects(depth: int) -> str:
    return '{"a":' * depth + '"ORD-77"' + "}" * depth


CASES = {
    "result: lists 600 deep": {"result": _lists(600)},
    "result: lists 3,000 deep": {"result": _lists(3_000)},
    "result: objects 1,500 deep": {"result": _objects(1_500)},
    "arguments: lists 600 deep": {"args": _lists(600)},
    "arguments: objects 1,500 deep": {"args": _objects(1_500)},
}


@pytest.mark.parametrize("case", CASES)
async def test_a_deeply_nested_json_tool_run_is_observed(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBSMEM_OFFLINE_PROCESS", "0")  # the same rules as in a child, in a thread
    given: dict[str, Any] = CASES[case]
    messages = [
        Message.user("Please look up my order.", created_at=T0),
        Message(role="assistant", created_at=T0 + timedelta(seconds=1), parts=(
            ToolCallPart(tool_call_id="c1", tool_name="lookup", args=given.get("args", {"order": "ORD-77"})),)),
        Message(role="tool", created_at=T0 + timedelta(seconds=2), parts=(
            ToolResultPart(tool_call_id="c1", tool_name="lookup", result=given.get("result", "found")),)),
        Message.assistant("Your order Zelmo-42 ships on Friday.", created_at=T0 + timedelta(seconds=3)),
    ]  # fmt: skip
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", resource_id="r")
        await memory.save_messages("t1", messages)
        outcome = await memory.observe("t1")
        record = await memory.get_record("t1")
    assert outcome.error is None
    assert record is not None
    assert "Zelmo-42" in record.active_observations
