"""An application's own model reporting its token counts as numpy integers (a sum or a shape read
off a tokenizer's arrays: ``np.int64``) has them recorded as 0 tokens (helper-127's hostile
review of 2b24e6b).

2b24e6b's ``ModelCall.__post_init__`` reads a count that is not exactly ``int`` through
``_token_count``, which takes only ``int | float`` instances: ``np.int64`` is neither, so 500
input tokens read 0, and ``Memory.usage()`` (and a budget reading the ledger) sees a free call.
Before 2b24e6b the in-memory ledger kept the count.
"""

from __future__ import annotations

import numpy as np
import pytest

from obsmem import Memory, Message
from obsmem.models.base import ModelRequest, ModelResponse, Usage

pytestmark = pytest.mark.anyio

OBSERVED = "<observations>\n* 🔴 The user talked about the trip.\n</observations>"


class NumpyCountingModel:
    name = "own:numpy"

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        self.calls += 1
        return ModelResponse(text=OBSERVED, usage=Usage(input_tokens=np.int64(500), output_tokens=np.int64(7)))


async def test_numpy_token_counts_are_recorded() -> None:
    model = NumpyCountingModel()
    async with Memory("memory://", model=model, max_turn_wait=None) as memory:
        await memory.create_thread("t1", resource_id="r")
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("trip " * 200)])
        await turn.end([Message.assistant("noted " * 20)])
        await memory.observe("t1")
        await memory.settled()
        report = await memory.usage()
    assert model.calls >= 1
    assert sum(row.input_tokens for row in report.rows) == 500 * model.calls
    assert sum(row.output_tokens for row in report.rows) == 7 * model.calls
