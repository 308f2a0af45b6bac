"""Human review: a value the reviewer rejected with a tombstone ("never capture it again") does
not come back because the user restated it with a conversational lead-in.

Before: after ``reject(..., tombstone=True)`` of "their phone number is +49 151 5550 7720", the
user's "Just to repeat, my phone number is +49 151 5550 7720." put "just to repeat, their phone
number is …" back in the review queue (the lead-in made it more than a near-duplicate of the
tombstoned value). Driven through ``Memory`` with the offline agents, over simulated hours.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio

NUMBER = "+49 151 5550 7720"


async def say(memory: Memory, clock: FakeClock, thread: str, text: str) -> None:
    await said(memory, clock, text, after_s=3600, thread=thread)


async def test_a_tombstoned_value_restated_with_a_lead_in_stays_out(anyio_backend: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        await say(memory, clock, "t1", f"My phone number is {NUMBER}.")
        (record,) = (await knowledge.review.pending(scope)).items
        await knowledge.review.reject(record.id, scope, reason="not her number", tombstone=True)
        for text in (f"Just to repeat, my phone number is {NUMBER}.", f"As I said, my phone number is {NUMBER}.",
                     f"To be clear, my phone number is {NUMBER}.", f"Again, my phone number is {NUMBER}."):
            await say(memory, clock, "t1", text)
            assert (await knowledge.review.pending(scope)).items == [], text
        events = (await knowledge.store.list_activity(scope, limit=100)).items
        assert sum(e.action is ActivityAction.WRITE_REFUSED and e.actor == "capture" for e in events) == 4


async def test_a_lead_in_is_not_part_of_a_new_fact(anyio_backend: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        await say(memory, clock, "t1", "To be clear, my home city is Berlin.")
        texts = [r.text for r in (await knowledge.review.pending(scope)).items]
        assert texts == ["their home city is Berlin"], texts


async def test_a_tombstoned_number_or_address_stays_out_under_another_word(anyio_backend: str) -> None:
    """"My mobile is …" or "You can reach me at …" give the tombstoned number again: refused too
    (the same phone number or email address on the same node is the same value)."""
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        await say(memory, clock, "t1", f"My phone number is {NUMBER}. My email is old.alice@mail.example.")
        for record in (await knowledge.review.pending(scope)).items:
            await knowledge.review.reject(record.id, scope, reason="not hers", tombstone=True)
        for text in (f"My mobile is {NUMBER}.", f"You can reach me at {NUMBER.replace(' ', '')}.",
                     "My personal address is OLD.Alice@mail.example."):
            await say(memory, clock, "t1", text)
            assert (await knowledge.review.pending(scope)).items == [], text
        # Another number is another value.
        await say(memory, clock, "t1", "My number is now +49 176 5550 3381.")
        assert ["3381" in r.text for r in (await knowledge.review.pending(scope)).items] == [True]
