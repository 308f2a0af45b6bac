"""``wake_work``: work handed back to wait for a lease is due at once when the lease is released.

It only moves a waiting item's due time forward to ``now``: no item is added, claimed items are
untouched, and attempts, last error and payload stay (waking is never an attempt).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import Store, WorkItem

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TTL = 30.0
LEASE_TTL = 60.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def claim_one(store: Store, owner: str, seconds: float = 0) -> WorkItem:
    items = await store.claim_work(owner, ttl_s=TTL, now=at(seconds))
    assert len(items) == 1, f"{owner} expected one item at +{seconds}s, got {items}"
    return items[0]


async def test_an_item_waiting_for_a_lease_is_due_at_once_when_woken(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0, payload={"n": 1})
    claimed = await claim_one(store, "worker-b")
    # worker-b found the thread's lease held elsewhere: it waits for the lease's expiry, not an attempt
    assert await store.release_work(claimed, now=at(1), delay_s=LEASE_TTL, count_attempt=False) is True
    assert await store.claim_work("worker-c", ttl_s=TTL, now=at(2)) == []  # waiting for the expiry

    assert await store.wake_work("observe", "t1", now=at(2)) is True  # the holder released the lease
    [woken] = await store.list_work()
    assert woken.id == claimed.id and woken.available_at == at(2) and woken.claimed_by is None
    assert (woken.attempts, woken.last_error, woken.payload) == (0, None, {"n": 1})  # waking is no attempt
    again = await claim_one(store, "worker-c", 2)  # another worker takes it at once
    assert again.id == claimed.id and again.attempts == 1 and again.claimed_by == "worker-c"


async def test_waking_keeps_a_failed_items_attempts_and_error(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    failed = await claim_one(store, "worker-a")
    assert await store.release_work(failed, now=at(1), delay_s=LEASE_TTL, error="StorageError: down") is True
    assert await store.wake_work("observe", "t1", now=at(3)) is True
    [woken] = await store.list_work()
    assert (woken.available_at, woken.attempts, woken.last_error) == (at(3), 1, "StorageError: down")


async def test_wake_adds_nothing_and_leaves_claims_and_due_items_alone(store: Store) -> None:
    assert await store.wake_work("observe", "t1", now=T0) is False  # nothing queued: nothing is created
    assert await store.list_work() == []

    await store.enqueue_work("observe", "t1", now=T0)
    running = await claim_one(store, "worker-a")
    assert await store.wake_work("observe", "t1", now=at(1)) is False  # only a claimed item: untouched
    assert await store.list_work() == [running]

    due = await store.enqueue_work("observe", "t1", now=at(2))  # due already: nothing to move
    assert await store.wake_work("observe", "t1", now=at(3)) is False
    assert await store.list_work() == [running, due]
    assert await store.complete_work(running) is True  # the claim is still the current one


async def test_wake_touches_only_its_kind_and_target(store: Store) -> None:
    for kind, target in [("observe", "t1"), ("reflect", "t1"), ("observe", "t2")]:
        await store.enqueue_work(kind, target, now=T0, delay_s=LEASE_TTL)
    assert await store.wake_work("observe", "t1", now=at(1)) is True
    due = {(w.kind, w.target): w.available_at for w in await store.list_work()}
    assert due == {("observe", "t1"): at(1), ("reflect", "t1"): at(LEASE_TTL), ("observe", "t2"): at(LEASE_TTL)}
    [taken] = await store.claim_work("worker-c", ttl_s=TTL, now=at(1), limit=5)
    assert (taken.kind, taken.target) == ("observe", "t1")
    assert await store.wake_work("observe", "t1", now=at(2)) is False  # claimed now: nothing waits


async def test_wake_checks_its_arguments(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        await store.wake_work("", "t1", now=T0)
    with pytest.raises(InvalidInputError):
        await store.wake_work("observe", "", now=T0)
    with pytest.raises(InvalidInputError):
        await store.wake_work("observe", "t1", now=T0.replace(tzinfo=None))
