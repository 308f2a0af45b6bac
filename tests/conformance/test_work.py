"""The work queue: enqueue coalesces, each item goes to one claimer, expired claims are retaken."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import Store, WorkItem

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TTL = 30.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def claim_one(store: Store, owner: str, seconds: float = 0, **kwargs: object) -> WorkItem:
    items = await store.claim_work(owner, ttl_s=TTL, now=at(seconds), **kwargs)  # type: ignore[arg-type]
    assert len(items) == 1, f"{owner} expected one item at +{seconds}s, got {items}"
    return items[0]


async def test_enqueue_then_claim_then_complete(store: Store) -> None:
    item = await store.enqueue_work("observe", "t1", now=T0, payload={"reason": "turn-end"})
    assert (item.kind, item.target, item.payload, item.attempts) == ("observe", "t1", {"reason": "turn-end"}, 0)
    assert item.enqueued_at == item.available_at == T0 and item.claimed_by is None
    assert await store.list_work() == [item]

    claimed = await claim_one(store, "worker-a")
    assert claimed.id == item.id and claimed.claimed_by == "worker-a" and claimed.attempts == 1
    assert claimed.claim_expires_at == at(TTL) and claimed.claim_token is not None
    assert await store.claim_work("worker-b", ttl_s=TTL, now=at(1)) == []  # held: nothing to claim

    assert await store.complete_work(claimed) is True
    assert await store.list_work() == []
    assert await store.complete_work(claimed) is False  # already gone


async def test_enqueue_coalesces_waiting_items(store: Store) -> None:
    first = await store.enqueue_work("observe", "t1", now=at(10), delay_s=5)
    again = await store.enqueue_work("observe", "t1", now=at(11))  # due earlier: the earlier time wins
    assert again.id == first.id and again.available_at == at(11)
    later = await store.enqueue_work("observe", "t1", now=at(12), delay_s=100, payload={"n": 2})
    assert later.id == first.id and later.available_at == at(11) and later.payload == {"n": 2}
    other_kind = await store.enqueue_work("reflect", "t1", now=at(12))
    other_target = await store.enqueue_work("observe", "t2", now=at(12))
    assert len({first.id, other_kind.id, other_target.id}) == 3
    assert [w.id for w in await store.list_work()] == sorted([first.id, other_kind.id, other_target.id])
    assert [w.target for w in await store.list_work("observe")] == ["t1", "t2"]


async def test_work_enqueued_while_claimed_is_a_new_item(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    running = await claim_one(store, "worker-a")
    fresh = await store.enqueue_work("observe", "t1", now=at(1))
    assert fresh.id != running.id and fresh.claimed_by is None
    second = await claim_one(store, "worker-b", seconds=1)
    assert second.id == fresh.id


async def test_delayed_work_is_not_claimed_early(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0, delay_s=10)
    assert await store.claim_work("worker-a", ttl_s=TTL, now=at(9.999)) == []
    assert (await claim_one(store, "worker-a", seconds=10)).target == "t1"


async def test_claims_oldest_first_with_limit_and_kinds(store: Store) -> None:
    for target in ("t1", "t2", "t3"):
        await store.enqueue_work("observe", target, now=T0)
    await store.enqueue_work("reflect", "t1", now=T0)
    first_two = await store.claim_work("worker-a", ttl_s=TTL, now=T0, limit=2)
    assert [w.target for w in first_two] == ["t1", "t2"]
    reflect = await store.claim_work("worker-b", ttl_s=TTL, now=T0, kinds=("reflect",), limit=5)
    assert [(w.kind, w.target) for w in reflect] == [("reflect", "t1")]
    rest = await store.claim_work("worker-c", ttl_s=TTL, now=T0, kinds=("observe", "reflect"), limit=5)
    assert [w.target for w in rest] == ["t3"]
    assert await store.claim_work("worker-d", ttl_s=TTL, now=T0, kinds=()) == []


async def test_expired_claim_is_retaken_with_a_higher_token(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    crashed = await claim_one(store, "worker-a")
    assert await store.claim_work("worker-b", ttl_s=TTL, now=at(TTL - 0.001)) == []
    taken = await claim_one(store, "worker-b", seconds=TTL)
    assert taken.id == crashed.id and taken.attempts == 2
    assert taken.claim_token is not None and crashed.claim_token is not None
    assert taken.claim_token > crashed.claim_token
    # The old claim is fenced off: it can neither renew, complete nor release the item.
    assert await store.renew_work(crashed, ttl_s=TTL, now=at(TTL + 1)) is None
    assert await store.complete_work(crashed) is False
    assert await store.release_work(crashed, now=at(TTL + 1)) is False
    assert await store.list_work() == [taken]
    assert await store.complete_work(taken) is True


async def test_renew_extends_only_a_current_unexpired_claim(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    claimed = await claim_one(store, "worker-a")
    renewed = await store.renew_work(claimed, ttl_s=60, now=at(TTL - 1))
    assert renewed is not None and renewed.claim_expires_at == at(TTL - 1 + 60)
    assert renewed.claim_token == claimed.claim_token
    assert await store.claim_work("worker-b", ttl_s=TTL, now=at(TTL + 10)) == []
    assert await store.renew_work(renewed, ttl_s=TTL, now=at(TTL - 1 + 60)) is None  # expired
    # An expired claim nobody retook may still be completed by its holder: the work is done.
    assert await store.complete_work(renewed) is True


async def test_release_puts_an_item_back_and_coalesces(store: Store) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    claimed = await claim_one(store, "worker-a")
    assert await store.release_work(claimed, now=at(1), delay_s=5, error="model timed out") is True
    (waiting,) = await store.list_work()
    assert waiting.id == claimed.id and waiting.claimed_by is None and waiting.claim_token is None
    assert waiting.available_at == at(6) and waiting.last_error == "model timed out" and waiting.attempts == 1
    assert await store.claim_work("worker-b", ttl_s=TTL, now=at(5)) == []

    again = await claim_one(store, "worker-b", seconds=6)
    newer = await store.enqueue_work("observe", "t1", now=at(7), delay_s=50)
    assert await store.release_work(again, now=at(8), error="again") is True
    (merged,) = await store.list_work()
    assert merged.id == newer.id and merged.available_at == at(8) and merged.attempts == 2
    assert merged.last_error == "again"


@pytest.mark.parametrize(
    ("kind", "target", "delay", "now"),
    [
        ("", "t1", 0.0, T0),
        ("observe", "", 0.0, T0),
        ("observe", "t1", -1.0, T0),
        ("observe", "t1", float("nan"), T0),
        ("observe", "t1", 1e300, T0),
        ("observe", "t1", 0.0, T0.replace(tzinfo=None)),
    ],
)
async def test_bad_enqueue_arguments_are_refused(
    store: Store, kind: str, target: str, delay: float, now: datetime
) -> None:
    with pytest.raises(InvalidInputError):
        await store.enqueue_work(kind, target, now=now, delay_s=delay)
    assert await store.list_work() == []


@pytest.mark.parametrize(
    ("owner", "ttl", "now", "limit"),
    [("", TTL, T0, 1), ("w", 0.0, T0, 1), ("w", -1.0, T0, 1), ("w", TTL, T0.replace(tzinfo=None), 1), ("w", TTL, T0, 0)],
)
async def test_bad_claim_arguments_are_refused(
    store: Store, owner: str, ttl: float, now: datetime, limit: int
) -> None:
    await store.enqueue_work("observe", "t1", now=T0)
    with pytest.raises(InvalidInputError):
        await store.claim_work(owner, ttl_s=ttl, now=now, limit=limit)
    (item,) = await store.list_work()
    assert item.claimed_by is None


async def test_twenty_racing_claimers_take_each_item_once(store: Store) -> None:
    for n in range(10):
        await store.enqueue_work("observe", f"t{n}", now=T0)

    async def worker(i: int) -> list[WorkItem]:
        await asyncio.sleep(0)
        return await store.claim_work(f"worker-{i}", ttl_s=TTL, now=T0, limit=2)

    results = await asyncio.gather(*(worker(i) for i in range(20)))
    claimed = [item for batch in results for item in batch]
    assert sorted(item.target for item in claimed) == sorted(f"t{n}" for n in range(10))
    assert len({item.claim_token for item in claimed}) == 10
