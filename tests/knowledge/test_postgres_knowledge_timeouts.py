"""A stuck lock never holds a knowledge write (or read) for ever.

The PostgreSQL knowledge store opened its connection with no statement, lock or idle timeout
(found by helper-131's review): a session holding the knowledge write lock (a process stopped
inside a write, an operator's query) made every later write (capture after an observation, a
review decision, ``memory.pin``) wait for as long as it held it. The store's session now has
``lock_timeout_s`` / ``statement_timeout_s`` (10 / 30 s by default, as the message store), so
the write fails with a StorageError naming the lock, and the store goes on once it is free.

The hang guard (``anyio.fail_after``) only keeps a regression from hanging the suite; what is
asserted is the error, not a time.
"""

from __future__ import annotations

import anyio
import psycopg
import pytest

from obsmem.errors import StorageError
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore

pytestmark = pytest.mark.anyio


async def test_a_write_behind_a_held_write_lock_fails_instead_of_waiting(postgres_url: str) -> None:
    async with PostgresKnowledgeStore(postgres_url) as store:
        await store.create_node("Before", "person", "org:acme", actor="test", reason="before the lock")
        with psycopg.connect(postgres_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(hashtextextended('obsmem.knowledge.write', 0))")
            with anyio.fail_after(60), pytest.raises(StorageError, match="lock"):
                await store.create_node("Jane", "person", "org:acme", actor="test", reason="behind the lock")
            holder.execute("SELECT pg_advisory_unlock_all()")
        node = await store.create_node("Jane", "person", "org:acme", actor="test", reason="after the lock")  # goes on
        assert node.name == "Jane"
