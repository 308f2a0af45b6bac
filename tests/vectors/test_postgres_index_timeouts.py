"""A stuck lock never holds a vector search (or write) for ever.

The PostgreSQL vector index opened its own connection with no statement, lock or idle timeout
(found by helper-131's review): another session holding a lock on the index's table (a long
migration, an operator's ``LOCK TABLE``, a stopped process inside a transaction) made every
``search`` (the recall tool's search mode, a turn's retrieval) wait as long as it held it. The
index's session now has ``lock_timeout_s`` / ``statement_timeout_s`` (10 / 30 s by default, as the
store), so the call fails with a StorageError naming the lock instead.

The hang guard below (``anyio.fail_after``) only keeps a regression from hanging the suite; what is
asserted is the error, not a time.
"""

from __future__ import annotations

import anyio
import numpy as np
import psycopg
import pytest

from obsmem.errors import StorageError
from obsmem.vectors import PostgresVectorIndex

pytestmark = pytest.mark.anyio

DIMS = 4


@pytest.mark.parametrize("use_pgvector", [True, False], ids=["pgvector", "array"])
async def test_a_search_behind_a_held_lock_fails_instead_of_waiting(postgres_url: str, use_pgvector: bool) -> None:
    # the defaults (as a user opens it): lock_timeout_s 10
    index = await PostgresVectorIndex.open(postgres_url, DIMS, name=f"held-{use_pgvector}", use_pgvector=use_pgvector)
    await index.upsert("a", np.ones(DIMS, dtype=np.float32))
    tables = [row[0] for row in psycopg.connect(postgres_url, autocommit=True).execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE '%vector%'").fetchall()]
    assert tables
    with psycopg.connect(postgres_url) as holder:  # a transaction holding every vector table
        for table in tables:
            holder.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
        with anyio.fail_after(60), pytest.raises(StorageError, match="lock"):
            await index.search(np.ones(DIMS, dtype=np.float32), 3)
        holder.rollback()
    assert [hit.key for hit in await index.search(np.ones(DIMS, dtype=np.float32), 3)] == ["a"]  # and it goes on
    await index.close()
