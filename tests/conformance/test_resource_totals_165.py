"""``resource_totals`` (:mod:`obsmem.storage.contract`, the totals of the server's resource usage):
a resource's thread count, message count and the tokens its live observation records observed,
each record once; on every adapter, natively (no thread, message or record handed out) and
through the fallback a store without the native method gets (``list_threads`` a page at a time)."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import ObservationRecord, Store
from obsmem.storage.contract import ResourceTotals, resource_totals
from obsmem.types import Message, Thread

from .without_native import WithoutNative

pytestmark = pytest.mark.anyio

READS = ("list_threads", "list_all_threads", "get_thread", "count_messages", "get_head", "get_record",
         "list_generations", "list_messages", "list_resource_messages")  # fmt: skip


class Plain(WithoutNative):
    HIDDEN = "resource_totals"


class Counted:
    """The store itself, every read that hands out rows counted (the native method uses none)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name not in READS:
            return found

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await found(*args, **kwargs)

        return counted


def record(lineage: str, resource: str, observed: int, *, thread: str | None = None, n: int = 0) -> ObservationRecord:
    scope = "thread" if thread else "resource"
    return ObservationRecord(
        id=f"om-{lineage}-{n}", lineage=lineage, scope=scope, thread_id=thread, resource_id=resource,
        total_tokens_observed=observed, observation_tokens=observed // 10,
    )


async def _seed(store: Store) -> dict[str, int]:
    """Threads of 'alice' (and others'), their messages and records of both scopes; the thread
    scope's expected tokens observed."""
    for n in range(7):
        await store.create_thread(Thread(id=f"a-{n}", resource_id="alice", org_id="acme"))
    await store.create_thread(Thread(id="b-1", resource_id="bob", org_id="acme"))
    for n in range(7):
        if n % 2 == 0:
            await store.save_messages(f"a-{n}", [Message.user(f"m{k}") for k in range(n + 1)])
    await store.save_messages("b-1", [Message.user("not alice's")] * 1)
    # thread scope: a head per thread for some threads; one lineage with a retired generation
    for n in (0, 1, 3):
        made = await store.create_record(record(f"thread:a-{n}", "alice", 100 * (n + 1), thread=f"a-{n}"))
        assert made.applied
    first = (await store.get_head("thread:a-3"))
    assert first is not None
    successor = record("thread:a-3", "alice", 1000, thread="a-3", n=1).model_copy(update={"generation": 1})
    assert (await store.create_generation(first, successor, expected_version=first.version)).applied
    assert (await store.create_record(record("thread:b-1", "bob", 5, thread="b-1"))).applied
    # resource scope: one shared record, retired once
    shared = (await store.create_record(record("resource:alice", "alice", 40))).record
    assert shared is not None
    newer = record("resource:alice", "alice", 77, n=1).model_copy(update={"generation": 1})
    assert (await store.create_generation(shared, newer, expected_version=shared.version)).applied
    assert (await store.create_record(record("resource:bob", "bob", 9))).applied
    return {"thread": 100 + 200 + 1000, "resource": 77}


@pytest.mark.parametrize("native", [True, False])
async def test_totals_count_threads_messages_and_live_records_once(store: Store, native: bool) -> None:
    expected = await _seed(store)
    view: Any = Counted(store) if native else Plain(store)
    messages = 1 + 3 + 5 + 7
    for scope in ("thread", "resource"):
        got = await resource_totals(view, "alice", scope=scope, page=3)  # type: ignore[arg-type]
        assert got == ResourceTotals(7, messages, expected[scope]), (scope, got)
    assert await resource_totals(view, "bob", scope="thread") == (1, 1, 5)
    assert await resource_totals(view, "bob", scope="resource") == (1, 1, 9)
    assert await resource_totals(view, "nobody", scope="thread") == (0, 0, 0)
    assert await resource_totals(view, "nobody", scope="resource") == (0, 0, 0)
    if native:
        assert callable(getattr(store, "resource_totals", None)), type(store).__name__
        assert view.calls == 0  # numbers handed out, no row
    else:
        assert max(view.pages) <= 500 and 3 in view.pages


async def test_a_resource_scope_record_is_counted_once_however_many_threads_share_it(store: Store) -> None:
    for n in range(12):
        await store.create_thread(Thread(id=f"t-{n}", resource_id="r", org_id="acme"))
        await store.save_messages(f"t-{n}", [Message.user("hi")])
    assert (await store.create_record(record("resource:r", "r", 216))).applied
    assert await resource_totals(store, "r", scope="resource") == (12, 12, 216)
    assert await resource_totals(Plain(store), "r", scope="resource", page=5) == (12, 12, 216)  # type: ignore[arg-type]
    assert await resource_totals(store, "r", scope="thread") == (12, 12, 0)


async def test_deleted_threads_leave_the_totals(store: Store) -> None:
    await _seed(store)
    assert await store.delete_thread("a-3")
    assert await store.delete_thread("a-0")
    for view in (store, Plain(store)):
        assert await resource_totals(view, "alice", scope="thread") == (5, 3 + 5 + 7, 200)  # type: ignore[arg-type]
        assert await resource_totals(view, "alice", scope="resource") == (5, 3 + 5 + 7, 77)  # type: ignore[arg-type]


async def test_a_record_holding_nul_is_counted(store: Store) -> None:
    await store.create_thread(Thread(id="t-nul", resource_id="r", org_id="acme", title="a\x00b"))
    await store.save_messages("t-nul", [Message.user("x\x00y")])
    made = record("thread:t-nul", "r", 31, thread="t-nul").model_copy(update={"active_observations": "said \x00 here"})
    assert (await store.create_record(made)).applied
    shared = record("resource:r", "r", 64).model_copy(update={"active_observations": "\x00", "metadata": {"k": "\x00"}})
    assert (await store.create_record(shared)).applied
    assert await resource_totals(store, "r", scope="thread") == (1, 1, 31)
    assert await resource_totals(store, "r", scope="resource") == (1, 1, 64)


async def test_bad_arguments_are_refused(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        await resource_totals(store, "r", scope="thread", page=0)
    with pytest.raises(InvalidInputError):
        await resource_totals(store, "r", scope="everything")  # type: ignore[arg-type]
