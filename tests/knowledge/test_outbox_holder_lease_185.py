"""An outbox claim expires by the lease its holder took, not by the lease of the worker that
looks at it next (helper-185).

Before, ``claim_outbox`` tested every held entry against the *claiming* worker's lease: a worker
asking with a one-second lease took over, a few seconds in, an entry another worker held for an
hour and was still embedding (both then wrote its vector; the holder's write was refused)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

RESOURCE = "org:acme/resource:alice"
T0 = datetime(2040, 1, 1, tzinfo=UTC)  # after the entries are available (the store runs on the real clock)


async def _one_entry(knowledge: Knowledge) -> None:
    user = await knowledge.node("User", "person", RESOURCE)
    await knowledge.append(user.id, "their home city is Munich", RESOURCE, reason="said")


async def test_a_short_lease_does_not_take_an_entry_held_under_a_long_one(knowledge: Knowledge) -> None:
    await _one_entry(knowledge)
    store = knowledge.store
    (held,) = await store.claim_outbox("slow", lease_seconds=3600, now=T0)
    assert await store.claim_outbox("quick", lease_seconds=1, now=T0 + timedelta(seconds=10)) == []
    assert await store.claim_outbox("quick", lease_seconds=1, now=T0 + timedelta(seconds=3599)) == []
    assert await store.complete_outbox("slow", [held.id]) == 1


async def test_a_long_lease_takes_an_entry_whose_short_lease_ran_out(knowledge: Knowledge) -> None:
    await _one_entry(knowledge)
    store = knowledge.store
    await store.claim_outbox("quick", lease_seconds=5, now=T0)
    assert await store.claim_outbox("slow", lease_seconds=3600, now=T0 + timedelta(seconds=4)) == []
    (taken,) = await store.claim_outbox("slow", lease_seconds=3600, now=T0 + timedelta(seconds=5))
    assert taken.claimed_by == "slow" and taken.attempts == 2
    assert await store.complete_outbox("quick", [taken.id]) == 0
    # the new holder's lease now counts: the quick worker waits the hour out
    assert await store.claim_outbox("quick", lease_seconds=5, now=T0 + timedelta(seconds=60)) == []
    (again,) = await store.claim_outbox("quick", lease_seconds=5, now=T0 + timedelta(seconds=3605))
    assert again.claimed_by == "quick" and again.attempts == 3


async def test_a_released_entry_is_claimable_whatever_lease_it_was_held_under(knowledge: Knowledge) -> None:
    await _one_entry(knowledge)
    store = knowledge.store
    (held,) = await store.claim_outbox("slow", lease_seconds=3600, now=T0)
    assert await store.release_outbox("slow", [held.id], retry_at=T0) == 1
    (taken,) = await store.claim_outbox("quick", lease_seconds=1, now=T0 + timedelta(seconds=1))
    assert taken.claimed_by == "quick"
