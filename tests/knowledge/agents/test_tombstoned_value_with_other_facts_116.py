"""A text that gives a tombstoned phone number or email address *and* other facts: the
tombstoned value stays out, the other facts are captured (helper-116).

The reviewer rejected "their phone number is +49 151 5550 7720" with a tombstone ("never
capture it again"). Later Alice says "My phone number is +49 151 5550 7720 and I moved to
Lisbon." Before, the whole statement was refused as the tombstoned number, and the move to
Lisbon was lost with it. Driven through ``Memory`` with the offline agents.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio

NUMBER = "+49 151 5550 7720"
EMAIL = "old.alice@mail.example"


async def say(memory: Memory, clock: FakeClock, text: str) -> None:
    await said(memory, clock, text, after_s=3600)


async def _pending(knowledge: Knowledge, scope: str) -> list[str]:
    return [r.text for r in (await knowledge.review.pending(scope)).items]


async def _refusals(knowledge: Knowledge, scope: str) -> int:
    events = (await knowledge.store.list_activity(scope, limit=200)).items
    return sum(e.action is ActivityAction.WRITE_REFUSED and e.actor == "capture" for e in events)


@pytest.mark.parametrize(
    ("first", "later", "kept"),
    [
        (f"My phone number is {NUMBER}.", f"My phone number is {NUMBER} and I moved to Lisbon.", "Lisbon"),
        (f"My email is {EMAIL}.", f"My email is {EMAIL.upper()} and I moved to Berlin.", "Berlin"),
        (f"My phone number is {NUMBER}.", f"I moved to Lisbon and my phone number is {NUMBER}.", "Lisbon"),
    ],
    ids=["number-then-move", "email-then-move", "move-then-number"],
)
async def test_the_other_facts_of_a_text_with_a_tombstoned_value_are_captured(
    anyio_backend: str, first: str, later: str, kept: str
) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        assert memory.knowledge_agents is not None
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        await say(memory, clock, first)
        (record,) = (await knowledge.review.pending(scope)).items
        await knowledge.review.reject(record.id, scope, reason="never capture it again", tombstone=True)
        refused = await _refusals(knowledge, scope)

        await say(memory, clock, later)
        pending = await _pending(knowledge, scope)
        assert any(kept in text for text in pending), pending  # the other fact is captured
        digits = "".join(ch for ch in NUMBER if ch.isdigit())
        for text in pending:  # and the tombstoned value is not, in any form
            assert digits not in "".join(ch for ch in text if ch.isdigit()), pending
            assert EMAIL not in text.casefold(), pending
        assert await _refusals(knowledge, scope) == refused + 1  # the tombstoned value's refusal is audited


@pytest.mark.parametrize(
    "rejected",
    [f"My phone number is {NUMBER} and I moved to Lisbon.", "My dog is called Kiwi and she is a beagle."],
    ids=["number-and-move", "plain-text"],
)
async def test_a_tombstoned_text_of_several_clauses_stays_out_whole(
    anyio_backend: str, rejected: str
) -> None:
    """What the reviewer refused is what the tombstoned text says: restated, none of its clauses
    comes back (a plain text, with no phone number or email address, is refused whole as before)."""
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        assert memory.knowledge_agents is not None
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        await say(memory, clock, rejected)
        assert await _pending(knowledge, scope) != []
        for record in (await knowledge.review.pending(scope)).items:
            await knowledge.review.reject(record.id, scope, reason="never capture it again", tombstone=True)
        await say(memory, clock, f"As I said, {rejected[0].lower()}{rejected[1:]}")
        assert await _pending(knowledge, scope) == []
