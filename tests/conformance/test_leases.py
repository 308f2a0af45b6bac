"""Leases: at most one unexpired holder per key, renewal, expiry, fencing tokens, release."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pydantic
import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import Lease, Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TTL = 30.0
KEY = "obs:thread:t1"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def take(store: Store, owner: str, seconds: float = 0, key: str = KEY, ttl: float = TTL) -> Lease:
    lease = await store.acquire_lease(key, owner, ttl_s=ttl, now=at(seconds))
    assert lease is not None, f"{owner} could not take {key} at +{seconds}s"
    return lease


# -- acquire -------------------------------------------------------------------------------------


async def test_acquire_a_free_key(store: Store) -> None:
    assert await store.get_lease(KEY) is None
    lease = await take(store, "engine-a")
    assert lease == Lease(
        key=KEY, owner="engine-a", token=lease.token, acquired_at=T0, expires_at=at(TTL)
    )
    assert lease.token >= 1
    assert await store.get_lease(KEY) == lease
    assert not lease.is_expired(at(TTL - 0.001)) and lease.is_expired(at(TTL))


async def test_another_owner_is_refused_while_unexpired(store: Store) -> None:
    lease = await take(store, "engine-a")
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=at(0)) is None
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=at(TTL - 0.001)) is None
    assert await store.get_lease(KEY) == lease  # a refusal changes nothing


async def test_holder_reacquiring_renews_with_the_same_token(store: Store) -> None:
    first = await take(store, "engine-a")
    again = await take(store, "engine-a", seconds=10)
    assert again.token == first.token
    assert again.acquired_at == first.acquired_at == T0
    assert again.expires_at == at(10 + TTL) > first.expires_at
    assert await store.get_lease(KEY) == again


async def test_after_expiry_another_owner_gets_a_higher_token(store: Store) -> None:
    first = await take(store, "engine-a")
    second = await take(store, "engine-b", seconds=TTL)  # expires_at <= now: expired
    assert second.owner == "engine-b" and second.token > first.token
    assert second.acquired_at == at(TTL) and second.expires_at == at(2 * TTL)
    assert await store.get_lease(KEY) == second
    # The old holder is now the one refused.
    assert await store.acquire_lease(KEY, "engine-a", ttl_s=TTL, now=at(TTL + 1)) is None


async def test_holder_reacquiring_after_expiry_gets_a_new_token(store: Store) -> None:
    first = await take(store, "engine-a")
    again = await take(store, "engine-a", seconds=TTL + 5)
    assert again.token > first.token
    assert again.acquired_at == at(TTL + 5)


async def test_tokens_keep_rising_across_release_and_keys(store: Store) -> None:
    tokens = [(await take(store, "engine-a")).token]
    assert await store.release_lease(KEY, "engine-a")
    tokens.append((await take(store, "engine-b", seconds=1)).token)  # free again after release
    tokens.append((await take(store, "engine-c", key="refl:thread:t1")).token)
    assert await store.release_lease(KEY, "engine-b")
    tokens.append((await take(store, "engine-a", seconds=2)).token)
    assert tokens == sorted(set(tokens))


async def test_keys_are_independent(store: Store) -> None:
    a = await take(store, "engine-a", key="obs:thread:t1")
    b = await take(store, "engine-b", key="obs:thread:t2")
    assert a.owner == "engine-a" and b.owner == "engine-b" and a.token != b.token


async def test_times_with_other_offsets_compare_as_instants(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    lease = await store.acquire_lease(KEY, "engine-a", ttl_s=TTL, now=T0.astimezone(plus_two))
    assert lease is not None and lease.acquired_at == T0
    assert lease.expires_at.utcoffset() == timedelta(hours=2)
    assert await store.get_lease(KEY) == lease
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=at(TTL - 1)) is None
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=at(TTL)) is not None


async def test_fractional_ttl(store: Store) -> None:
    lease = await take(store, "engine-a", ttl=0.25)
    assert lease.expires_at == T0 + timedelta(milliseconds=250)
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=1, now=at(0.2)) is None
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=1, now=at(0.25)) is not None


@pytest.mark.parametrize(
    ("key", "owner", "ttl", "now"),
    [
        ("", "engine-a", TTL, T0),
        (KEY, "", TTL, T0),
        (KEY, "engine-a", 0, T0),
        (KEY, "engine-a", -1, T0),
        (KEY, "engine-a", float("nan"), T0),
        (KEY, "engine-a", float("inf"), T0),
        (KEY, "engine-a", 1e300, T0),
        (KEY, "engine-a", TTL, T0.replace(tzinfo=None)),
    ],
)
async def test_bad_arguments_are_refused(
    store: Store, key: str, owner: str, ttl: float, now: datetime
) -> None:
    with pytest.raises(InvalidInputError):
        await store.acquire_lease(key, owner, ttl_s=ttl, now=now)
    with pytest.raises(InvalidInputError):
        await store.renew_lease(key, owner, ttl_s=ttl, now=now)
    assert await store.list_leases() == []


# -- renew ---------------------------------------------------------------------------------------


async def test_holder_renews_before_expiry(store: Store) -> None:
    first = await take(store, "engine-a")
    renewed = await store.renew_lease(KEY, "engine-a", ttl_s=60, now=at(TTL - 1))
    assert renewed is not None
    assert renewed.token == first.token and renewed.acquired_at == T0
    assert renewed.expires_at == at(TTL - 1 + 60)
    assert await store.get_lease(KEY) == renewed
    # Renewed in time, so another owner is still refused past the first expiry.
    assert await store.acquire_lease(KEY, "engine-b", ttl_s=TTL, now=at(TTL + 10)) is None


async def test_renew_by_a_non_holder_is_refused(store: Store) -> None:
    lease = await take(store, "engine-a")
    assert await store.renew_lease(KEY, "engine-b", ttl_s=TTL, now=at(1)) is None
    assert await store.get_lease(KEY) == lease


async def test_renew_after_expiry_is_refused(store: Store) -> None:
    lease = await take(store, "engine-a")
    assert await store.renew_lease(KEY, "engine-a", ttl_s=TTL, now=at(TTL)) is None
    assert await store.get_lease(KEY) == lease  # not revived, not removed
    await take(store, "engine-b", seconds=TTL + 1)
    assert await store.renew_lease(KEY, "engine-a", ttl_s=TTL, now=at(TTL + 2)) is None


async def test_renew_of_a_missing_or_released_lease_is_refused(store: Store) -> None:
    assert await store.renew_lease(KEY, "engine-a", ttl_s=TTL, now=T0) is None
    assert await store.get_lease(KEY) is None  # renew never creates
    await take(store, "engine-a")
    assert await store.release_lease(KEY, "engine-a")
    assert await store.renew_lease(KEY, "engine-a", ttl_s=TTL, now=at(1)) is None


# -- release, get, list --------------------------------------------------------------------------


async def test_release_only_by_the_holder(store: Store) -> None:
    lease = await take(store, "engine-a")
    assert await store.release_lease(KEY, "engine-b") is False
    assert await store.get_lease(KEY) == lease
    assert await store.release_lease(KEY, "engine-a") is True
    assert await store.get_lease(KEY) is None
    assert await store.release_lease(KEY, "engine-a") is False
    assert await store.release_lease("never-taken", "engine-a") is False


async def test_holder_may_release_an_expired_lease(store: Store) -> None:
    await take(store, "engine-a")
    assert await store.release_lease(KEY, "engine-a") is True  # no clock: expiry does not matter
    assert await store.get_lease(KEY) is None


async def test_list_leases_by_prefix(store: Store) -> None:
    keys = ["obs:thread:t2", "refl:thread:t1", "obs:thread:t1", "a_b", "axb", "OBS:upper"]
    for i, key in enumerate(keys):
        await take(store, f"engine-{i}", key=key)
    assert [lease.key for lease in await store.list_leases()] == sorted(keys)
    assert [lease.key for lease in await store.list_leases("obs:")] == ["obs:thread:t1", "obs:thread:t2"]
    assert [lease.key for lease in await store.list_leases("refl:thread:t1")] == ["refl:thread:t1"]
    assert [lease.key for lease in await store.list_leases("a_")] == ["a_b"]  # no wildcards
    assert [lease.key for lease in await store.list_leases("%")] == []
    assert await store.list_leases("nothing") == []
    listed = {lease.key: lease for lease in await store.list_leases()}
    for key in keys:
        assert listed[key] == await store.get_lease(key)


async def test_list_includes_expired_until_taken_or_released(store: Store) -> None:
    await take(store, "engine-a")
    (expired,) = await store.list_leases()
    assert expired.is_expired(at(TTL + 100))
    assert await store.release_lease(KEY, "engine-a")
    assert await store.list_leases() == []


async def test_lease_is_frozen(store: Store) -> None:
    lease = await take(store, "engine-a")
    with pytest.raises(pydantic.ValidationError):
        lease.owner = "engine-b"


# -- races ---------------------------------------------------------------------------------------


async def test_twenty_concurrent_acquirers_exactly_one_wins(store: Store) -> None:
    async def attempt(i: int) -> Lease | None:
        await asyncio.sleep(0)
        return await store.acquire_lease(KEY, f"engine-{i}", ttl_s=TTL, now=T0)

    results = await asyncio.gather(*(attempt(i) for i in range(20)))
    winners = [lease for lease in results if lease is not None]
    assert len(winners) == 1
    assert await store.get_lease(KEY) == winners[0]


async def test_concurrent_acquirers_after_expiry_exactly_one_wins(store: Store) -> None:
    old = await take(store, "engine-old")
    results = await asyncio.gather(
        *(store.acquire_lease(KEY, f"engine-{i}", ttl_s=TTL, now=at(TTL)) for i in range(20))
    )
    winners = [lease for lease in results if lease is not None]
    assert len(winners) == 1 and winners[0].token > old.token
    assert await store.get_lease(KEY) == winners[0]
