"""A ledger batch the store refuses because the store is down (or locked by another process) is
retried a call at a time: 500 more writes, each waiting out the store's own timeout (helper-127's
hostile review of 2b24e6b).

2b24e6b's ``LedgerWriter._write_each`` writes a failed batch call by call, so a call the store
cannot take costs only its own row. When the store itself is refusing (SQLite locked past its
10 s busy timeout, PostgreSQL unreachable), every one of up to BATCH=500 calls is tried again:
``flush`` (which ``Memory.close``, ``delete_thread`` and the worker's next claim await) makes 501
store writes where it made 1, e.g. 500 x 10 s of busy timeout. Counted as store writes, not timed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from obsmem.calls import ModelCall
from obsmem.storage.ledger import BATCH, LedgerWriter

pytestmark = pytest.mark.anyio


async def test_a_store_that_is_down_is_not_written_once_per_call() -> None:
    attempts = 0

    async def down(calls: Sequence[ModelCall]) -> int:
        nonlocal attempts
        attempts += 1
        raise ConnectionError("the database is unreachable")

    writer = LedgerWriter(down)
    now = datetime.now(UTC)
    for _ in range(BATCH):
        writer(ModelCall(role="observer", model="openai:m", started_at=now, latency_s=0.5, input_tokens=10))
    await writer.flush()
    assert writer.dropped == BATCH
    assert attempts <= 2 * BATCH.bit_length(), f"{attempts} store writes for one batch of {BATCH} while the store is down"
