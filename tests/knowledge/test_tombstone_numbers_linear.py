"""Checking a write against a tombstone that gives many phone numbers stays linear.

7a91167 made a tombstoned text and a new text "the same value" when the new one gives every
number of the tombstoned one in any written form, and compared the two lists pairwise: a
tombstoned contact list of n numbers against a text giving them in another order and form cost
n² comparisons (4,000 numbers: ~21 s of CPU on this machine). Work is counted, not timed
(:mod:`tests.integrity.work_count`); 4× the numbers must cost about 4× the work.
"""

from __future__ import annotations

import asyncio

import pytest

from obsmem.errors import TombstonedValueError
from obsmem.knowledge import Knowledge
from tests.integrity.work_count import GROWTH_BOUND, work

RES = "org:acme/resource:alice"


def _write_work(n: int) -> int:
    loop = asyncio.new_event_loop()
    try:
        knowledge = Knowledge.in_memory(actor="reviewer")
        listed = "; ".join(f"+49 151 {1_000_000 + i}" for i in range(n))
        again = "; ".join(f"0151 {1_000_000 + i}" for i in reversed(range(n)))  # the same numbers, national

        async def prepare() -> str:
            node = await knowledge.node("User", "person", RES)
            record = await knowledge.append(node.id, f"their phone numbers are {listed}", RES, reason="said")
            await knowledge.remove(record.id, RES, reason="wrong", tombstone=True)
            return node.id

        node = loop.run_until_complete(prepare())

        def write(_: str) -> None:
            with pytest.raises(TombstonedValueError):
                loop.run_until_complete(knowledge.append(node, f"call me on {again}", RES, reason="said again"))

        write("")  # warm-up
        return work(write, "")
    finally:
        loop.close()


def test_a_tombstone_listing_many_numbers_is_checked_in_linear_work() -> None:
    small, large = _write_work(150), _write_work(600)
    assert large / small < GROWTH_BOUND, (small, large)


_FORMS = ["491512345678", "01512345678", "431512345678", "3906123456", "06123456", "0612345678",
          "11512345678", "015123456789", "a@b.example", "0a@b.example", "390612345678", "1512345678"]


def test_the_lookup_answers_as_the_pairwise_rule() -> None:
    """gives_all / gives_any by the index agree with same_typed pair by pair, on every subset
    pair of a table of forms (international, national, Italian trunk 0, emails)."""
    from itertools import combinations

    from obsmem.knowledge.store.values import gives_all, gives_any, same_typed

    subsets = [list(c) for r in range(0, 3) for c in combinations(_FORMS, r)]
    for wanted in subsets:
        for given in subsets:
            pairwise_all = all(any(same_typed(w, g) for g in given) for w in wanted)
            pairwise_any = any(any(same_typed(w, g) for g in given) for w in wanted)
            assert gives_all(wanted, given) == pairwise_all, (wanted, given)
            assert gives_any(wanted, given) == pairwise_any, (wanted, given)
