"""A memory model reporting absurd token counts (helper-121's hostile review): a provider, proxy or
local server whose ``usage`` says 10^20 tokens, against a real local server and a SQLite store.

On main the count went into :class:`~obsmem.models.base.Usage` as sent; the observation itself
succeeded, but the cost ledger could not store the call (SQLite integers stop at 2^63), and
``Memory.usage()`` showed no call at all: the call, its latency and every honest count in it were
lost from the ledger, silently. A count past any one call's possible size (2^40 tokens) now reads
as that ceiling, so the call is recorded and the absurd count is visible as such.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.models.anthropic import AnthropicModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.transport import Endpoint

from .wire_server import Reply, WireServer

pytestmark = pytest.mark.anyio

HUGE = 10**20
OBSERVED = "<observations>\n* 🔴 The user greeted the assistant.\n</observations>"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as wire:
        yield wire


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_call_reporting_absurd_usage_is_still_in_the_ledger(
    server: WireServer, tmp_path: Path, provider: str
) -> None:
    """On main: Memory.usage() had no rows (the call was never recorded)."""
    if provider == "openai":
        server.responder = lambda request: Reply(json={
            "model": "m", "usage": {"prompt_tokens": HUGE, "completion_tokens": 7},
            "choices": [{"message": {"role": "assistant", "content": OBSERVED}, "finish_reason": "stop"}]})  # fmt: skip
        model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=False, timeout_s=10)
    else:
        server.responder = lambda request: Reply(json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": OBSERVED}], "usage": {"input_tokens": HUGE, "output_tokens": 7}})  # fmt: skip
        model = AnthropicModel("m", Endpoint("anthropic", server.url), stream=False, timeout_s=10)
    memory = Memory(f"sqlite:///{tmp_path / 'memory.db'}", model=model, max_turn_wait=None)
    async with memory:
        await memory.create_thread("t", resource_id="r")
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("hello there " * 20)])
        await turn.end([Message.assistant("hi " * 20)])
        await memory.observe("t")
        report = await memory.usage()
    assert len(server.requests) >= 1
    assert sum(row.calls for row in report.rows) == len(server.requests)
    assert sum(row.output_tokens for row in report.rows) == 7 * len(server.requests)
    assert all(0 < row.input_tokens <= 2**40 * row.calls for row in report.rows)
