"""Resolving a receipt's groups reads each covered message once, however the groups overlap
(reflection groups can each span most of a long thread): the work is linear in the messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.om.receipts import Receipt, ReceiptGroup

pytestmark = pytest.mark.anyio


async def test_overlapping_groups_are_read_once_and_each_gets_its_span(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'r.db'}")
    await memory.create_thread("t1", "u1")
    saved = await memory.save_messages("t1", [Message.user(f"message {i}") for i in range(400)])
    seqs = [m.seq or 0 for m in saved]
    spans = [(seqs[0], seqs[-1])] * 30 + [(seqs[10], seqs[20]), (seqs[390], seqs[-1]), (seqs[5], seqs[5])]
    groups = tuple(ReceiptGroup(f"g{i}", "t1", first, last, "reflection") for i, (first, last) in enumerate(spans))
    receipt = Receipt(thread_id="t1", context_hash="0" * 64, groups=groups)

    read: list[int] = []
    real = memory.store.list_messages

    async def counting(*args: object, **kwargs: object) -> list[Message]:
        page = await real(*args, **kwargs)  # type: ignore[arg-type]
        read.extend(m.seq or 0 for m in page)
        return page

    memory.store.list_messages = counting  # type: ignore[method-assign]
    sources = await memory.receipt_sources(receipt)
    assert len(read) == 400  # each message once, not once per group (30 × 400)
    by_seq = {m.seq: m.text for m in saved}
    for group in groups:
        assert [m.seq for m in sources[group.id]] == [s for s in seqs if group.first_seq <= s <= group.last_seq]
        assert all(m.text == by_seq[m.seq] for m in sources[group.id])
    assert list(sources)[: len(groups)] == [g.id for g in groups]

    read.clear()
    shown = await memory.receipt_sources(receipt, per_group=3)
    assert all(len(shown[g.id]) == min(3, g.last_seq - g.first_seq + 1) for g in groups)
    await memory.aclose()
