"""A tool call whose result alone is larger than ``max_tokens_per_batch`` is observed with its
result: the observer request holding the result's first piece holds the call too. Before, the
call went to the observer alone ("lookup(order=ORD-1234) -> no result yet") and the result in
the next request without its call ("lookup() -> Order ORD-1234 shipped"): what the tool was
asked and what it answered never met (found by helper-146)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)


async def test_a_call_and_its_large_result_are_observed_together() -> None:
    big = "Order ORD-1234 shipped. " + "row data " * 6000  # about 54 K characters: past 10,000 tokens
    messages = [
        Message.user("Look up order ORD-1234 please.", created_at=T0),
        Message(role="assistant", created_at=T0 + timedelta(seconds=1), parts=(
            ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"order": "ORD-1234"}),)),
        Message(role="tool", created_at=T0 + timedelta(seconds=2), parts=(
            ToolResultPart(tool_call_id="c1", tool_name="lookup", result=big),)),
        Message.assistant("Your order ORD-1234 has shipped.", created_at=T0 + timedelta(seconds=3)),
    ]
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", resource_id="r")
        await memory.save_messages("t1", messages)
        await memory.observe("t1")
        record = await memory.get_record("t1")
        assert record is not None
        text = record.active_observations
        assert "no result yet" not in text
        assert "lookup(order=ORD-1234) -> Order ORD-1234 shipped" in text
