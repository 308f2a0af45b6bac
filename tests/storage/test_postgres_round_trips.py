"""Round trips of the PostgreSQL store's hot path (issue 22: workers that scale).

Counted, not timed: the statements each call sends. A worker's job runs ~30 store calls; before
these changes every call also sent an empty query to check its pooled connection, and a claim
or an enqueue also sent BEGIN and COMMIT around its one statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from obsmem.errors import StorageError
from obsmem.storage import ObservationRecord, ThreadState, lineage_key
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


class Sent:
    """Every statement and every transaction the store's connections open, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def statements(self) -> list[str]:
        return [entry for entry in self.log if entry != "BEGIN"]

    def clear(self) -> None:
        self.log.clear()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    record = Sent()
    execute, transaction = psycopg.AsyncConnection.execute, psycopg.AsyncConnection.transaction

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        record.log.append(str(query) if isinstance(query, str) else repr(query))
        return await execute(self, query, *args, **kwargs)

    def counted_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        record.log.append("BEGIN")
        return transaction(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted_execute)
    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted_transaction)
    yield record


async def test_read_window_is_one_statement(postgres_url: str, sent: Sent) -> None:
    async with PostgresStore(postgres_url, max_size=1) as store:
        store.check_idle_s = float("inf")  # never re-check a used connection: count the call alone
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        saved = await store.save_messages("t1", [Message.user(f"m{i}") for i in range(4)])
        assert saved[1].seq is not None
        record = ObservationRecord(
            id="om-1", lineage=lineage_key("thread", "t1", "r1"), scope="thread", thread_id="t1",
            resource_id="r1", created_at=T0, updated_at=T0, threads={"t1": ThreadState(cursor=saved[1].seq)},
        )
        await store.create_record(record)
        sent.clear()
        head, messages = await store.read_window("thread:t1", "t1")
        assert head is not None and [m.text for m in messages] == ["m2", "m3"]
        assert len(sent.log) == 1, sent.log  # no BEGIN, no thread check, no connection check


async def test_a_recently_used_connection_is_not_checked_before_each_call(postgres_url: str, sent: Sent) -> None:
    async with PostgresStore(postgres_url, max_size=1) as store:
        store.check_idle_s = float("inf")
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        sent.clear()
        for _ in range(3):
            await store.get_thread("t1")
        assert len(sent.log) == 3 and "" not in sent.log
        store.check_idle_s = 0.0  # every connection counts as idle: checked (an empty query) first
        sent.clear()
        await store.get_thread("t1")
        assert sent.log[0] == "" and len(sent.log) == 2


async def test_claim_and_enqueue_are_one_statement_each(postgres_url: str, sent: Sent) -> None:
    async with PostgresStore(postgres_url, max_size=1) as store:
        store.check_idle_s = float("inf")
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        now = datetime.now(UTC)
        sent.clear()
        item = await store.enqueue_work("observe", "t1", now=now)
        assert len(sent.log) == 1
        sent.clear()
        [claimed] = await store.claim_work("w1", ttl_s=30, now=now)
        assert claimed.id == item.id and claimed.claimed_by == "w1"
        assert len(sent.log) == 1
        assert await store.claim_work("w2", ttl_s=30, now=now) == []  # claimed: nothing for another


async def test_a_dead_connection_handed_out_unchecked_is_replaced_not_surfaced(postgres_url: str) -> None:
    # check_idle_s is infinite, so the killed connections go out unchecked: the first statement on
    # each fails, and the store checks the pool and retries instead of raising.
    async with PostgresStore(postgres_url, min_size=3, max_size=3, retry_s=5) as store:
        store.check_idle_s = float("inf")
        await store.create_thread(Thread(id="t1", resource_id="r1"))
        for _ in range(3):
            await store.get_thread("t1")
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # what a server restart does to them
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        for _ in range(6):
            thread = await store.get_thread("t1")
            assert thread is not None and thread.id == "t1"


async def test_a_failed_pipelined_acquisition_leaves_the_connection_clean(postgres_url: str) -> None:
    # acquire_lease runs its own transaction in pipeline mode; when a statement of it fails,
    # nothing of it stays open on the pooled connection (the next calls on the one connection work).
    async with PostgresStore(postgres_url, max_size=1, lock_timeout_s=0.2) as store:
        now = datetime.now(UTC)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_advisory_lock(hashtextextended('obsmem.lease:' || 'k1', 0))")
            with pytest.raises(StorageError, match="lock_timeout"):
                await store.acquire_lease("k1", "w1", ttl_s=30, now=now)
            admin.execute("SELECT pg_advisory_unlock_all()")
            admin.execute("UPDATE lease_tokens SET last_token = 41")
        lease = await store.acquire_lease("k1", "w1", ttl_s=30, now=now)
        assert lease is not None and lease.token == 42
        again = await store.acquire_lease("k1", "w1", ttl_s=60, now=now)  # the holder: same token
        assert again is not None and again.token == 42 and again.expires_at > lease.expires_at
        assert await store.acquire_lease("k1", "w2", ttl_s=30, now=now) is None
        assert await store.get_lease("k1") == again
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("DELETE FROM lease_tokens")
        with pytest.raises(StorageError, match="lease token counter row is missing"):
            await store.acquire_lease("k2", "w1", ttl_s=30, now=now)
        assert await store.get_lease("k2") is None  # no lease without a token
