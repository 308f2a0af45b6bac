"""A model of the application's own (the ``ChatModel`` protocol) reporting a token count no store
can hold, beside honest calls: every call must still be in the cost ledger.

Helper-121 capped the counts the built-in providers parse (2^40); a model written by a user (or a
LiteLLM answer, or a wrapper that sums usages) reaches the ledger as it is. On main the ledger
wrote its calls in batches of up to 500 and a batch that failed was dropped whole: one call
reporting 10^20 tokens (SQLite integers stop at 2^63) took the *honest* calls written with it out
of ``Memory.usage()`` too, silently.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.models.base import ModelRequest, ModelResponse, Usage

pytestmark = pytest.mark.anyio

OBSERVED = "<observations>\n* 🔴 The user talked about the trip.\n</observations>"


class OwnModel:
    """An application's own observer model: every third call reports an absurd usage."""

    name = "own:model"

    def __init__(self, absurd: Usage) -> None:
        self.calls = 0
        self.absurd = absurd

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        self.calls += 1
        usage = self.absurd if self.calls % 3 == 2 else Usage(input_tokens=100, output_tokens=7)
        return ModelResponse(text=OBSERVED, usage=usage)


@pytest.mark.parametrize(
    "absurd",
    [
        Usage(input_tokens=10**20, output_tokens=7),
        Usage(input_tokens=100, output_tokens=10**30, cached_input_tokens=10**19),
    ],
    ids=["input-1e20", "output-1e30"],
)
async def test_every_call_of_an_own_model_is_in_the_ledger(tmp_path: Path, absurd: Usage) -> None:
    model = OwnModel(absurd)
    memory = Memory(f"sqlite:///{tmp_path / 'memory.db'}", model=model, max_turn_wait=None)
    async with memory:
        threads = [f"t{n}" for n in range(6)]
        for n, thread in enumerate(threads):
            await memory.create_thread(thread, resource_id="r")
            turn = await memory.begin_turn(thread_id=thread, messages=[Message.user(f"trip {n} " * 40)])
            await turn.end([Message.assistant("noted " * 20)])
        # Observed at once: their calls reach the ledger together (written in one batch).
        await asyncio.gather(*(memory.observe(thread) for thread in threads))
        await memory.settled()
        report = await memory.usage()
    assert model.calls >= 6
    rows = report.rows
    assert sum(row.calls for row in rows) == model.calls  # on main: 2 and 1 of 6 (whole batches dropped)
    for row in rows:
        for count in (row.input_tokens, row.output_tokens, row.cached_input_tokens):
            assert 0 <= count < 2**63
        assert row.cost_usd is None or math.isfinite(row.cost_usd)


async def test_a_call_the_store_refuses_costs_only_its_own_row(tmp_path: Path) -> None:
    """The ledger's writer against a real SQLite store: a call the store cannot take (here a model
    name holding a lone surrogate, which SQLite cannot encode) written in one batch with honest
    calls. On main the whole batch was dropped (0 of 5 rows); now only that call is."""
    from datetime import UTC, datetime

    from obsmem.calls import ModelCall
    from obsmem.storage.ledger import LedgerWriter

    memory = Memory(f"sqlite:///{tmp_path / 'memory.db'}")
    async with memory:
        writer = LedgerWriter(memory.store.record_model_calls)
        now = datetime.now(UTC)
        for n in range(5):
            writer(ModelCall(role="observer", model="own:\udcff" if n == 2 else "own:model", started_at=now,
                             latency_s=0.5, input_tokens=10, output_tokens=1))
        await writer.flush()
        report = await memory.usage()
    assert (writer.written, writer.dropped) == (4, 1)
    assert sum(row.calls for row in report.rows) == 4
