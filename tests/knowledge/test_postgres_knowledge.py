"""PostgreSQL-only behaviour of the knowledge store: migrations, the database-held write lock,
several stores on one database. The contract itself is tested in ``tests/knowledge/conformance``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime
from typing import TypedDict

import psycopg
import pytest

from obsmem.errors import ConfigError, MigrationError, StorageError, StoreClosedError
from obsmem.knowledge import Knowledge, migrate_knowledge
from obsmem.knowledge.store.contract import Node, RecordDraft
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.postgres import KNOWLEDGE_MIGRATIONS_TABLE, PostgresKnowledgeStore
from obsmem.storage.migrations import MIGRATIONS_TABLE

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"
WRITE_LOCK_KEY = "SELECT hashtextextended('obsmem.knowledge.write', 0)"


class Act(TypedDict):
    actor: str
    reason: str


ACT: Act = {"actor": "tester", "reason": "postgres"}


async def test_the_tables_record_their_own_migrations_beside_the_message_store(postgres_url: str) -> None:
    async with PostgresKnowledgeStore(postgres_url) as store:
        await store.create_node("Jane", "person", RES, **ACT)
    with psycopg.connect(postgres_url) as conn:
        knowledge = [row[0] for row in conn.execute(f"SELECT name FROM {KNOWLEDGE_MIGRATIONS_TABLE}")]
        messages = [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")]
    assert knowledge == ["m001_knowledge_initial", "m002_knowledge_pages_by_node", "m003_knowledge_unowned_speaker_facts",
                         "m004_knowledge_search_index"]
    assert "m001_initial" in messages  # the message store's migrations are untouched


async def test_a_database_from_a_newer_obsmem_is_refused(postgres_url: str) -> None:
    async with PostgresKnowledgeStore(postgres_url) as store:
        await store.list_nodes(RES)
    with psycopg.connect(postgres_url) as conn:
        conn.execute(f"INSERT INTO {KNOWLEDGE_MIGRATIONS_TABLE} VALUES ('m999_future', now())")
    async with PostgresKnowledgeStore(postgres_url) as store:
        with pytest.raises(MigrationError, match="newer obsmem"):
            await store.list_nodes(RES)


async def test_two_stores_on_one_database_create_one_node(postgres_url: str) -> None:
    # Both stores also migrate the empty database at once, on their first call.
    async with PostgresKnowledgeStore(postgres_url) as first, PostgresKnowledgeStore(postgres_url) as second:
        made = await asyncio.gather(
            *[store.create_node("Jane", "person", RES, **ACT) for store in (first, second) for _ in range(5)]
        )
        assert len({node.id for node in made}) == 1
        assert len((await second.list_nodes(RES)).items) == 1
        assert [e.action for e in (await first.list_activity(RES)).items] == ["node-created"]


async def test_two_workers_on_one_database_never_claim_the_same_entry(postgres_url: str) -> None:
    async with PostgresKnowledgeStore(postgres_url) as first, PostgresKnowledgeStore(postgres_url) as second:
        jane = await first.create_node("Jane", "person", RES, **ACT)
        for index in range(30):
            await first.append_record(RecordDraft(jane.id, f"fact {index}", RES), **ACT)
        batches = await asyncio.gather(
            *[
                store.claim_outbox(worker, limit=4)
                for _ in range(5)
                for store, worker in ((first, "a"), (second, "b"))
            ]
        )
        claimed = [entry.id for batch in batches for entry in batch]
        assert len(claimed) == 30 and len(set(claimed)) == 30


async def test_a_write_waits_for_the_lock_held_in_the_database(postgres_url: str) -> None:
    """The writers' lock is the server's: a transaction elsewhere holding it stalls this store's
    write (seen waiting in pg_locks), and the write then sees what that transaction committed."""
    now = datetime.now(UTC)
    planted = Node(
        id=UlidGenerator().new(), name="Jane", kind="person", scope=RES, created_at=now, updated_at=now
    )
    async with PostgresKnowledgeStore(postgres_url) as store:
        await store.list_nodes(RES)  # migrated
        with (
            psycopg.connect(postgres_url, autocommit=True) as holder,
            psycopg.connect(postgres_url, autocommit=True) as watcher,
        ):
            row = watcher.execute(WRITE_LOCK_KEY).fetchone()
            assert row is not None
            holder.execute("BEGIN")
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (int(row[0]),))
            write = asyncio.ensure_future(store.create_node("Jane", "person", RES, **ACT))
            for _ in range(2000):
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()
                if waiting is not None and waiting[0] == 1:
                    break
                await asyncio.sleep(0.005)
            else:
                pytest.fail("the write never queued on the advisory lock")
            assert not write.done()
            holder.execute(
                "INSERT INTO knowledge_nodes (id, scope, name_key, doc) VALUES (%s, %s, %s, %s)",
                (planted.id, RES, b"jane", planted.model_dump_json()),
            )
            holder.execute("COMMIT")
            assert await write == planted  # it found the committed node instead of making a second


async def test_a_name_with_a_nul_character_round_trips(postgres_url: str) -> None:
    async with PostgresKnowledgeStore(postgres_url) as store:
        made = await store.create_node("Ja\x00ne", "person", RES, **ACT)
        assert (await store.resolve_node("ja\x00ne", RES)) == made
        assert (await store.resolve_node("Jane", RES)) is None


async def test_a_closed_store_refuses_calls(postgres_url: str) -> None:
    store = PostgresKnowledgeStore(postgres_url)
    await store.close()
    await store.close()  # twice is fine
    with pytest.raises(StoreClosedError):
        await store.list_nodes(RES)


async def test_an_unreachable_server_is_a_storage_error_without_the_password() -> None:
    url = "postgresql://someone:hunter2@127.0.0.1:1/nowhere"
    async with PostgresKnowledgeStore(url, connect_timeout_s=2) as store:
        with pytest.raises(StorageError, match="Cannot connect") as caught:
            await store.list_nodes(RES)
    assert "hunter2" not in str(caught.value) and "hunter2" not in repr(store)


def test_a_url_that_is_not_postgresql_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a PostgreSQL URL"):
        PostgresKnowledgeStore("sqlite:///k.db")


async def test_knowledge_postgres_keeps_the_graph_in_the_database(postgres_url: str) -> None:
    from obsmem.knowledge import PostgresKnowledgeStore as exported

    sqlalchemy_style = postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
    async with Knowledge.postgres(sqlalchemy_style, actor="curator") as knowledge:
        assert isinstance(knowledge.store, exported)
        jane = await knowledge.node("Jane", "person", RES)
        record = await knowledge.append(jane.id, "Jane moved to [[Berlin]]", RES, reason="said so")
        hits = await knowledge.search("where does Jane live", RES)
        assert record.id in [hit.id for hit in hits]
    async with PostgresKnowledgeStore(postgres_url) as reopened:
        assert [r.id for r in (await reopened.list_about(jane.id, RES)).items] == [record.id]
        assert (await reopened.resolve_node("berlin", RES)) is not None
        assert [v.record_id for v in await reopened.list_vectors() if v.record_id == record.id] == [record.id]


_WITHOUT_PSYCOPG = """
import sys

class NoPsycopg:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPsycopg())
import obsmem
from obsmem.errors import ConfigError
from obsmem.knowledge import Knowledge, SQLiteKnowledgeStore
try:
    Knowledge.postgres("postgresql://me@db/obsmem")
except ConfigError as exc:
    print("refused:", exc)
"""


def test_obsmem_knowledge_imports_without_psycopg() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PSYCOPG], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout and "obsmem[postgres]" in result.stdout


async def test_migrate_knowledge_lists_then_applies_by_url(postgres_url: str) -> None:
    # The test database has the message store's tables (the migrated template), not the knowledge ones.
    assert await migrate_knowledge(postgres_url, dry_run=True) == ["m001_knowledge_initial", "m002_knowledge_pages_by_node", "m003_knowledge_unowned_speaker_facts",
                         "m004_knowledge_search_index"]
    assert await migrate_knowledge(postgres_url) == ["m001_knowledge_initial", "m002_knowledge_pages_by_node", "m003_knowledge_unowned_speaker_facts",
                         "m004_knowledge_search_index"]
    assert await migrate_knowledge(postgres_url) == []
    assert await migrate_knowledge(postgres_url, dry_run=True) == []
