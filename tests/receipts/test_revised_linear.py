"""Revising a receipt (the turn's question shown again in a tool loop, knowledge blocks added) is
linear in the raw tail: it looked each raw message's id up in the receipt's id tuples, a scan of
the whole tail per message (88 ms of the event loop for a tail of 4,000 messages, 14× for 4×).

The lookups happen inside C (``in`` on a tuple of strings), which the work counter cannot see,
so the receipt's stored ids here are a ``str`` whose comparisons run in Python: each comparison
is one traced call (:mod:`tests.integrity.work_count`).
"""

from __future__ import annotations

from obsmem.om.receipts import Receipt
from obsmem.types import Message

from tests.integrity.work_count import GROWTH_BOUND, work


class _Id(str):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        return str.__hash__(self)


def _revise(size: str) -> Receipt:
    tail = [Message.user(f"q{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(len(size))]
    receipt = Receipt(
        thread_id="t1", context_hash="0" * 64, raw_message_ids=tuple(_Id(m.id) for m in tail[1:]),
        raw_outside=(_Id("elsewhere"),),
    )
    return receipt.revised(tail, tail)  # the question (tail[0]) shown again in front


def test_a_revised_receipt_costs_work_linear_in_the_raw_tail() -> None:
    revised = _revise("x" * 10)
    assert len(revised.raw_message_ids) == 10 and len(revised.raw_outside) == 1, "the question is outside"
    growth = work(_revise, "x" * 2000) / work(_revise, "x" * 500)
    assert growth < GROWTH_BOUND, f"4x the raw tail took {growth:.1f}x the work"
