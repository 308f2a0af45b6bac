"""The cost ledger (issue 18): one row per model call, summed per UTC day, role and model in the
store, filtered by thread, resource and time, deleted with a thread or a resource."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from obsmem.calls import ModelCall, UsageRow
from obsmem.errors import InvalidInputError
from obsmem.storage import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 23, 0, tzinfo=UTC)


def call(role: str = "observer", *, at: float = 0.0, thread: str | None = "t1", resource: str | None = "r1",
         model: str = "openai:gpt-4o-mini", inp: int = 100, cached: int = 0, out: int = 10,
         outcome: str = "ok") -> ModelCall:
    return ModelCall(
        role=role, model=model, started_at=T0 + timedelta(seconds=at), latency_s=0.5, outcome=outcome,  # type: ignore[arg-type]
        thread_id=thread, resource_id=resource, input_tokens=inp, cached_input_tokens=cached,
        cache_write_tokens=3, output_tokens=out, error_type=None if outcome == "ok" else "ModelError",
    )


async def test_rows_are_summed_per_day_role_and_model(store: Store) -> None:
    assert await store.record_model_calls([
        call(), call(cached=40), call("reflector", out=50), call(outcome="error", inp=7, out=0),
        call(at=3600 * 2),  # the next UTC day
    ]) == 5
    rows = await store.usage_rows()
    assert rows == [
        UsageRow(day="2025-03-01", role="observer", model="openai:gpt-4o-mini", calls=3, failed=1, input_tokens=207,
                 cached_input_tokens=40, cache_write_tokens=9, output_tokens=20, latency_s=1.5),
        UsageRow(day="2025-03-01", role="reflector", model="openai:gpt-4o-mini", calls=1, input_tokens=100,
                 cache_write_tokens=3, output_tokens=50, latency_s=0.5),
        UsageRow(day="2025-03-02", role="observer", model="openai:gpt-4o-mini", calls=1, input_tokens=100,
                 cache_write_tokens=3, output_tokens=10, latency_s=0.5),
    ]


async def test_day_is_the_utc_day_whatever_the_offset(store: Store) -> None:
    local = datetime(2025, 3, 2, 1, 30, tzinfo=timezone(timedelta(hours=5)))  # 2025-03-01 20:30 UTC
    await store.record_model_calls([ModelCall(role="observer", model="m", started_at=local, latency_s=0.1)])
    [row] = await store.usage_rows()
    assert row.day == "2025-03-01"


async def test_filters_isolate_threads_resources_and_time(store: Store) -> None:
    await store.record_model_calls([
        call(thread="t1", resource="r1"), call(thread="t2", resource="r1", at=10),
        call(thread="t3", resource="r2", at=20), call(thread=None, resource="r2", at=30, role="embedding"),
    ])
    assert sum(r.calls for r in await store.usage_rows(thread_id="t1")) == 1
    assert sum(r.calls for r in await store.usage_rows(resource_id="r1")) == 2
    assert sum(r.calls for r in await store.usage_rows(resource_id="r2")) == 2
    assert sum(r.calls for r in await store.usage_rows(thread_id="t3", resource_id="r1")) == 0
    assert sum(r.calls for r in await store.usage_rows(since=T0 + timedelta(seconds=10))) == 3
    assert sum(r.calls for r in await store.usage_rows(until=T0 + timedelta(seconds=10))) == 1
    window = await store.usage_rows(since=T0 + timedelta(seconds=10), until=T0 + timedelta(seconds=30))
    assert sum(r.calls for r in window) == 2
    with pytest.raises(InvalidInputError):
        await store.usage_rows(since=datetime(2025, 1, 1))


async def test_deleting_a_thread_or_a_resource_deletes_its_rows(store: Store) -> None:
    await store.record_model_calls([
        call(thread="t1", resource="r1"), call(thread="t1", resource="r1"), call(thread="t2", resource="r1"),
        call(thread="t3", resource="r2"),
    ])
    assert await store.delete_model_calls(thread_id="t1") == 2
    assert sum(r.calls for r in await store.usage_rows()) == 2
    assert await store.delete_model_calls(resource_id="r1") == 1
    assert [r.calls for r in await store.usage_rows()] == [1]
    assert await store.delete_model_calls(resource_id="nobody") == 0
    with pytest.raises(InvalidInputError):
        await store.delete_model_calls()


async def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert await store.record_model_calls([]) == 0
    assert await store.usage_rows() == []
