"""The other threads of a resource are read from their own cursors: the rows read are the rows returned.

``list_resource_messages_after`` is memory's per-turn read, in resource scope, of what it has not
observed of a resource's other threads. The tables here hold a resource thread of 4,000 messages
(all but the newest five observed) beside 36,000 messages of another resource; the plan of the
exact statement the store sent must read the five, the small thread no cursor names, and nothing
of the observed history, the excluded thread or the other resource.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.storage import SQLiteStore
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Message, Thread

from .plans import SentToPostgres, SentToSQLite, pg_outline, pg_plan, pg_rows_read, sqlite_plan
from .test_thread_message_reads import (
    LONG, T0, _postgres_store_with_a_long_old_thread, _sqlite_store_with_a_long_old_thread,
)

pytestmark = pytest.mark.anyio

EXPECTED = [f"long {i}" for i in range(LONG - 4, LONG + 1)] + ["new 0", "new 1", "new 2"]


async def _threads_of_r1(store: SQLiteStore | PostgresStore) -> None:
    """Threads the fill does not make: a new one (no cursor) and the turn's own (excluded)."""
    await store.create_thread(Thread(id="new", resource_id="r1", created_at=T0))
    await store.create_thread(Thread(id="me", resource_id="r1", created_at=T0))
    await store.save_messages("me", [Message.user(f"me {i}") for i in range(50)])
    await store.save_messages("new", [Message.user(f"new {i}") for i in range(3)])


def _cursors() -> dict[str, int]:
    return {"long": LONG - 5, "me": 0}  # long-i has seq i (inserted first)


async def test_postgres_reads_only_the_messages_after_each_cursor(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _postgres_store_with_a_long_old_thread(postgres_url)
    sent = SentToPostgres(monkeypatch)
    async with PostgresStore(postgres_url) as store:
        await _threads_of_r1(store)
        sent.clear()
        found = await store.list_resource_messages_after("r1", _cursors(), exclude_thread_id="me")
        assert [m.text for m in found] == EXPECTED
        query, params = sent.only(" messages")
        plan = pg_plan(postgres_url, query, params)
        assert pg_rows_read(plan, "messages") <= len(EXPECTED), pg_outline(plan)


async def test_sqlite_reads_only_the_messages_after_each_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "om.db"
    await _sqlite_store_with_a_long_old_thread(path)
    async with SQLiteStore(path) as store:
        await _threads_of_r1(store)
    sent = SentToSQLite(monkeypatch)
    async with SQLiteStore(path) as store:
        found = await store.list_resource_messages_after("r1", _cursors(), exclude_thread_id="me")
        assert [m.text for m in found] == EXPECTED
    [statement] = [s for s in sent.matching("SELECT m.seq") if "json_each" in s]
    plan = sqlite_plan(path, statement)
    assert sum("SEARCH m USING INDEX messages_by_thread (thread_id=? AND seq>?)" in line for line in plan) == 1, plan
    assert sum("SEARCH m USING INDEX messages_by_thread (thread_id=?)" in line for line in plan) == 1, plan
    scans = [line for line in plan if line.startswith("SCAN")]
    assert all("VIRTUAL TABLE" in line for line in scans), plan  # only the cursors' JSON is scanned
    # The work the statement did: about what a read of the eight rows costs, not of the 4,000.
    [steps] = sent.steps_per_statement(statement[:40])
    assert steps * SentToSQLite.STEP < 2_000, steps
