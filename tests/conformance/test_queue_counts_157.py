"""The queue's bounded reads (``count_work``, ``has_work``, ``dead_work_page``, ``count_dead_work``,
``lease_page``, ``count_leases`` in :mod:`obsmem.storage.contract`) say what the whole-list
methods say, on every adapter, natively and through the fallback a store without them gets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import Store
from obsmem.storage.contract import (
    count_dead_work,
    count_leases,
    count_work,
    dead_work_page,
    has_work,
    lease_counts_of,
    lease_page,
    work_counts_of,
)

pytestmark = pytest.mark.anyio

NATIVE = ("count_work", "has_work", "dead_work_page", "count_dead_work", "lease_page", "count_leases")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PLUS2 = timezone(timedelta(hours=2))


class Plain:
    """A store without the native bounded reads (a third-party store written before them)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in NATIVE:
            raise AttributeError(name)
        return getattr(self._inner, name)


@pytest.fixture(params=["native", "fallback"])
def view(request: pytest.FixtureRequest, store: Store) -> Any:
    if request.param == "native":
        for name in NATIVE:
            assert callable(getattr(store, name, None)), f"{type(store).__name__} lacks {name}"
        return store
    return Plain(store)


async def _seed_queue(store: Store) -> None:
    # enqueued at various instants, written with another offset too
    for n in range(6):
        await store.enqueue_work("observe", f"t{n}", now=(NOW - timedelta(seconds=10 * n)).astimezone(PLUS2))
    await store.enqueue_work("reflect", "r1", now=NOW - timedelta(seconds=5, microseconds=123), delay_s=600)
    await store.enqueue_work("reflect", "r2", now=NOW, delay_s=0)
    claimed = await store.claim_work("w1", ttl_s=30, now=NOW - timedelta(seconds=40), kinds=("observe",), limit=2)
    assert len(claimed) == 2  # claims expired at NOW - 10 s
    assert await store.claim_work("w2", ttl_s=600, now=NOW, kinds=("observe",), limit=1)
    await store.enqueue_work("knowledge", "k1", now=NOW)
    (taken,) = await store.claim_work("w3", ttl_s=600, now=NOW, kinds=("knowledge",))
    assert await store.bury_work(taken, now=NOW, error="boom")


async def test_count_work_is_the_whole_queue_counted(store: Store, view: Any) -> None:
    await _seed_queue(store)
    counted = await count_work(view, now=NOW)
    assert counted == work_counts_of(await store.list_work(), NOW)
    by_kind = {row.kind: row for row in counted}
    assert set(by_kind) == {"observe", "reflect"}  # the buried kind has no queued item
    observe = by_kind["observe"]
    assert (observe.waiting, observe.due, observe.claimed, observe.expired_claims) == (3, 3, 3, 2)
    assert observe.oldest_enqueued_at == NOW - timedelta(seconds=50)
    reflect = by_kind["reflect"]
    assert (reflect.waiting, reflect.due, reflect.claimed) == (2, 1, 0)
    assert reflect.oldest_enqueued_at == NOW - timedelta(seconds=5, microseconds=123)
    assert await count_work(view, now=NOW) == counted  # reads only
    assert await count_work(Plain(store), now=NOW) == counted


async def test_has_work_sees_waiting_and_claimed_items(store: Store, view: Any) -> None:
    assert await has_work(view, "observe") is False
    await store.enqueue_work("reflect", "r", now=NOW, delay_s=3600)
    assert await has_work(view, "observe") is False and await has_work(view, "reflect") is True
    await store.enqueue_work("observe", "t", now=NOW)
    (item,) = await store.claim_work("w", ttl_s=1, now=NOW, kinds=("observe",))
    assert await has_work(view, "observe") is True  # claimed (and its claim expired later) still counts
    assert await store.complete_work(item)
    assert await has_work(view, "observe") is False


async def test_dead_work_pages_cover_every_buried_item_once(store: Store, view: Any) -> None:
    for n in range(11):
        await store.enqueue_work("observe", f"t{n}", now=NOW)
    for item in await store.claim_work("w", ttl_s=60, now=NOW, limit=11):
        assert await store.bury_work(item, now=NOW, error=f"e{item.id}")
    assert await count_dead_work(view) == 11
    seen: list[int] = []
    before: int | None = None
    while page := await dead_work_page(view, limit=4, before_id=before):
        assert len(page) <= 4
        seen += [dead.id for dead in page]
        before = page[-1].id
    whole = await store.list_dead_work()
    assert seen == [dead.id for dead in reversed(whole)]
    assert await dead_work_page(view, limit=2) == list(reversed(whole))[:2]
    for bad in (0, -1, True):
        with pytest.raises(InvalidInputError):
            await dead_work_page(view, limit=bad)


async def test_lease_pages_and_counts_follow_list_leases(store: Store, view: Any) -> None:
    keys = ["obs:a", "obs:b%", "obs:b_", "obs:B", "obs:é", "obs:z", "obs:zz", "obsx", "other:1", "OBS:c"]
    for n, key in enumerate(keys):
        ttl = 5.0 if n % 3 == 0 else 600.0  # every third has expired at NOW
        assert await store.acquire_lease(key, "w", ttl_s=ttl, now=NOW - timedelta(seconds=10))
    for prefix in ("", "obs:", "obs:b", "%", "nothing"):
        whole = await store.list_leases(prefix)
        seen = []
        after: str | None = None
        while page := await lease_page(view, prefix, limit=3, after_key=after):
            assert len(page) <= 3
            seen += page
            after = page[-1].key
        assert seen == whole, prefix
        assert await count_leases(view, prefix, now=NOW) == lease_counts_of(whole, NOW)
    assert await count_leases(view, "obs:", now=NOW) == (7, 3)
    with pytest.raises(InvalidInputError):
        await lease_page(view, limit=0)


async def test_count_leases_is_exact_at_the_expiry(store: Store, view: Any) -> None:
    """A lease is expired at ``expires_at <= now``, to the microsecond, whatever the offset."""
    offsets = {"at": 0, "before": -1, "after": 1, "after-400us": 400, "before-400us": -400, "after-3ms": 3000}
    for name, us in offsets.items():
        taken = NOW + timedelta(microseconds=us) - timedelta(seconds=60)
        assert await store.acquire_lease(f"x:{name}", "w", ttl_s=60, now=taken.astimezone(PLUS2))
    expired = sum(1 for lease in await store.list_leases("x:") if lease.is_expired(NOW))
    assert expired == 3
    assert await count_leases(view, "x:", now=NOW) == (6, 3)
    assert await count_leases(view, "x:", now=NOW.astimezone(PLUS2)) == (6, 3)
    with pytest.raises(InvalidInputError):
        await count_leases(view, "x:", now=NOW.replace(tzinfo=None))
