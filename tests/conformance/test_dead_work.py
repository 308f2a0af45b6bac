"""Issue 22 §1: a hand-back that is not a failure does not count, and poison work is kept.

``release_work(..., count_attempt=False)`` gives an item back without using up an attempt (the
claim was only handed back because someone else's lease covers the thread). ``bury_work`` moves
an item that keeps failing to the dead-letter table with its last error; ``list_dead_work``
shows it, ``retry_dead_work`` queues it again (fresh attempts), ``delete_work`` (forgetting a
thread) removes its dead items too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem.storage import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TTL = 30.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def test_a_hand_back_that_does_not_count_leaves_attempts_alone(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    for n in range(10):  # ten hand-backs, none of them a failure
        [claimed] = await store.claim_work("w", ttl_s=TTL, now=at(n))
        assert claimed.attempts == 1
        assert await store.release_work(claimed, now=at(n), delay_s=0.5, count_attempt=False) is True
    [item] = await store.list_work()
    assert item.attempts == 0 and item.available_at == at(9.5) and item.claimed_by is None


async def test_a_counted_failure_keeps_its_attempt_and_error(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    [claimed] = await store.claim_work("w", ttl_s=TTL, now=T0)
    assert await store.release_work(claimed, now=T0, delay_s=1, error="boom") is True
    [claimed] = await store.claim_work("w", ttl_s=TTL, now=at(1))
    assert await store.release_work(claimed, now=at(1), count_attempt=False) is True
    [item] = await store.list_work()
    assert item.attempts == 1 and item.last_error == "boom"  # the uncounted hand-back kept both


async def test_an_uncounted_hand_back_coalesces_without_counting(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    [claimed] = await store.claim_work("w", ttl_s=TTL, now=T0)
    await store.enqueue_work("observe", "t1", now=T0, delay_s=5)  # new work arrived meanwhile
    assert await store.release_work(claimed, now=T0, delay_s=1, count_attempt=False) is True
    [item] = await store.list_work()
    assert item.attempts == 0 and item.available_at == at(1)


async def test_buried_work_is_kept_listed_and_retried(store: Store) -> None:
    queued = await store.enqueue_work("observe", "t1", now=T0, payload={"n": 1})
    await store.enqueue_work("reflect", "t2", now=T0)
    [claimed] = await store.claim_work("w", ttl_s=TTL, now=T0, kinds=("observe",))
    assert await store.bury_work(claimed, now=at(2), error="ValueError: bad") is True
    assert await store.bury_work(claimed, now=at(2), error="again") is False  # not the current claim any more
    assert [w.kind for w in await store.list_work()] == ["reflect"]

    [dead] = await store.list_dead_work()
    assert (dead.id, dead.kind, dead.target, dead.payload) == (queued.id, "observe", "t1", {"n": 1})
    assert (dead.attempts, dead.last_error, dead.failed_at, dead.enqueued_at) == (1, "ValueError: bad", at(2), T0)
    assert await store.list_dead_work("reflect") == []

    again = await store.retry_dead_work(dead.id, now=at(5))
    assert again is not None and (again.kind, again.target, again.payload, again.attempts) == ("observe", "t1", {"n": 1}, 0)
    assert again.available_at == at(5)
    assert await store.list_dead_work() == []
    assert await store.retry_dead_work(dead.id, now=at(6)) is None  # gone: nothing to retry
    [claimed] = await store.claim_work("w", ttl_s=TTL, now=at(5), kinds=("observe",))
    assert claimed.id == again.id


async def test_a_retried_dead_item_coalesces_into_waiting_work(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    [claimed] = await store.claim_work("w", ttl_s=TTL, now=T0)
    assert await store.bury_work(claimed, now=T0, error="x") is True
    waiting = await store.enqueue_work("observe", "t1", now=at(1), delay_s=10)
    [dead] = await store.list_dead_work()
    again = await store.retry_dead_work(dead.id, now=at(2))
    assert again is not None and again.id == waiting.id and again.available_at == at(2)
    assert len(await store.list_work()) == 1


async def test_forgetting_a_thread_deletes_its_dead_work(store: Store) -> None:
    for target in ("t1", "t2"):
        await store.enqueue_work("observe", target, now=T0)
        [claimed] = await store.claim_work("w", ttl_s=TTL, now=T0)
        assert await store.bury_work(claimed, now=T0, error=None) is True
    assert await store.delete_work("t1") == 0  # nothing queued for t1: only its dead item, which goes too
    assert [d.target for d in await store.list_dead_work()] == ["t2"]
