"""A tombstone giving two phone numbers (or a number and an email address) stays out when a later
text gives them again in separate clauses beside another fact (review of 2b60287, helper-119).

The reviewer rejected "their phone numbers are … and …" with a tombstone. Later Alice says "My
mobile is …, my office phone is … and I moved to Lisbon": the store refuses the text (it gives
every value the tombstone gives), and 2b60287 then captured its clauses on their own, each giving
one of the tombstoned values, which the store no longer matched (a tombstone of several values
refuses a text giving all of them): both numbers came back, pending review, as two records.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio

N1 = "+49 151 5550 7720"
N2 = "+49 30 1234 5678"
EMAIL = "old.alice@mail.example"


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


async def _pending(knowledge: Knowledge, scope: str) -> list[str]:
    return [r.text for r in (await knowledge.review.pending(scope)).items]


async def _reject_all(memory: Memory, knowledge: Knowledge, clock: FakeClock, text: str) -> str:
    assert memory.knowledge_agents is not None
    scope = memory.knowledge_agents.scope(None, "alice", "t1").key
    await said(memory, clock, text, after_s=3600)
    items = (await knowledge.review.pending(scope)).items
    assert items
    for record in items:
        await knowledge.review.reject(record.id, scope, reason="never capture it again", tombstone=True)
    return scope


@pytest.mark.parametrize(
    ("rejected", "later"),
    [
        (f"My phone numbers are {N1} and {N2}.",
         f"My mobile is {N1}, my office phone is {N2} and I moved to Lisbon."),
        (f"My phone number is {N1} and my fax number is {N2}.",
         f"My mobile is {N1}, my fax is {N2} and I moved to Lisbon."),
        (f"My email is {EMAIL} and my phone is {N1}.",
         f"My address is {EMAIL.upper()}, my mobile is {N1} and I moved to Lisbon."),
    ],
    ids=["two-numbers", "number-and-fax", "email-and-number"],
)
async def test_the_values_of_a_tombstone_of_several_stay_out_of_the_split_clauses(
    anyio_backend: str, rejected: str, later: str
) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        scope = await _reject_all(memory, knowledge, clock, rejected)
        await said(memory, clock, later, after_s=3600)
        pending = await _pending(knowledge, scope)
        assert any("Lisbon" in text for text in pending), pending  # the other fact is captured
        for text in pending:  # and no tombstoned value is, in any clause
            assert _digits(N1) not in _digits(text), pending
            assert _digits(N2) not in _digits(text), pending
            assert EMAIL not in text.casefold(), pending
