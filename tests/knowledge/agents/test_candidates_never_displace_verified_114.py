"""Under the default ``"candidate"`` trust a reviewer's verified fact stays what the user's context
holds until the reviewer approves a change: an unreviewed candidate never makes curate remove it.

Before: Alice's reviewed phone number (edited by a person) was removed by curate the day a
candidate with a new number arrived; the reviewer rejected that candidate, and Alice had no phone
number at all. Driven through ``Memory`` over simulated days, with the offline agents.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge, RecordView

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio

OLD, EDITED, NEW = "+49 151 5550 7720", "+49 151 5550 7721", "+49 176 5550 3381"


async def say(memory: Memory, clock: FakeClock, text: str) -> None:
    await said(memory, clock, text, after_s=86400)


async def current(knowledge: Knowledge, scope: str, view: RecordView = RecordView()) -> list[str]:
    user = await knowledge.store.resolve_node("User", scope)
    assert user is not None
    return [r.text for r in (await knowledge.store.list_about(user.id, scope, view=view, limit=100)).items]


async def reminder(memory: Memory, clock: FakeClock) -> str:
    message = Message.user("Sorry, what is my phone number again? It's for a form.", created_at=clock.now())
    turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[message])
    texts = [m.text for m in turn.context.messages if m.metadata.get("obsmem") == "knowledge-reminder"]
    await turn.end()
    return "\n".join(texts)


@pytest.mark.parametrize("decision", ["reject", "approve"])
async def test_an_unreviewed_candidate_does_not_remove_the_reviewed_fact(anyio_backend: str, decision: str) -> None:
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        await say(memory, clock, f"My phone number is {OLD}.")
        (first,) = (await knowledge.review.pending(scope)).items
        await knowledge.review.edit(first.id, scope, f"their phone number is {EDITED}", reason="typo, checked")
        assert await current(knowledge, scope) == [f"their phone number is {EDITED}"]

        await say(memory, clock, f"My number is now {NEW}.")
        await memory.curate_knowledge("t1")
        # Pending review, the context still holds the reviewed number.
        assert await current(knowledge, scope) == [f"their phone number is {EDITED}"]
        events = (await knowledge.store.list_activity(scope, limit=100)).items
        assert not [e for e in events if e.action is ActivityAction.RECORD_DELETED and e.actor == "curate"]

        (candidate,) = (await knowledge.review.pending(scope)).items
        assert NEW in candidate.text
        if decision == "reject":
            await knowledge.review.reject(candidate.id, scope, reason="not her number")
            assert await current(knowledge, scope) == [f"their phone number is {EDITED}"]
            # What remind searches (it told this number a turn ago, so it does not repeat it now).
            found = " ".join(hit.text for hit in await knowledge.search("phone number", scope))
            assert EDITED in found and NEW not in found
        else:
            await knowledge.review.approve(candidate.id, scope, reason="she confirmed")
            assert await current(knowledge, scope) == [candidate.text]
            # The old number is history, not gone: it answers for the day it held.
            past = RecordView(as_of=start + timedelta(days=1, hours=12))
            assert await current(knowledge, scope, past) == [f"their phone number is {EDITED}"]
            told = await reminder(memory, clock)
            assert NEW in told and EDITED not in told
