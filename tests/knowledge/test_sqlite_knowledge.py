"""SQLite-only behaviour of the knowledge store: file format, migrations, several stores on one file."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import TypedDict

import pytest

from obsmem.errors import ConfigError, MigrationError, StoreClosedError
from obsmem.knowledge import migrate_knowledge
from obsmem.knowledge.store.contract import RecordDraft
from obsmem.knowledge.store.sqlite import KNOWLEDGE_MIGRATIONS_TABLE, SQLiteKnowledgeStore

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"


class Act(TypedDict):
    actor: str
    reason: str


ACT: Act = {"actor": "tester", "reason": "sqlite"}


async def test_the_file_is_wal_and_records_its_own_migrations(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with SQLiteKnowledgeStore(path) as store:
        await store.create_node("Jane", "person", RES, **ACT)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [row[0] for row in conn.execute(f"SELECT name FROM {KNOWLEDGE_MIGRATIONS_TABLE}")]
    assert names == ["m001_knowledge_initial", "m002_knowledge_open_outbox", "m003_knowledge_pages_by_node",
                     "m004_knowledge_unowned_speaker_facts",
                     "m005_knowledge_search_index"]


async def test_a_database_from_a_newer_obsmem_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with SQLiteKnowledgeStore(path) as store:
        await store.list_nodes(RES)
    with sqlite3.connect(path) as conn:
        conn.execute(f"INSERT INTO {KNOWLEDGE_MIGRATIONS_TABLE} VALUES ('m999_future', 'x')")
    async with SQLiteKnowledgeStore(path) as store:
        with pytest.raises(MigrationError, match="newer obsmem"):
            await store.list_nodes(RES)


async def test_two_stores_on_one_file_create_one_node(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with SQLiteKnowledgeStore(path) as first, SQLiteKnowledgeStore(path) as second:
        made = await asyncio.gather(
            *[store.create_node("Jane", "person", RES, **ACT) for store in (first, second) for _ in range(5)]
        )
        assert len({node.id for node in made}) == 1
        assert len((await second.list_nodes(RES)).items) == 1
        assert [e.action for e in (await first.list_activity(RES)).items] == ["node-created"]


async def test_a_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = SQLiteKnowledgeStore(tmp_path / "k.db")
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.list_nodes(RES)


async def test_the_docstring_example_runs() -> None:
    import obsmem.knowledge as knowledge_module

    source = knowledge_module.__doc__ or ""
    example = source.split("::", 1)[1].split("Scopes are", 1)[0]
    lines = [line[4:] for line in example.splitlines() if line.strip()]
    code = "async def _example():\n" + "\n".join("    " + line for line in lines)
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102 - the documentation is the test subject
    await namespace["_example"]()  # type: ignore[operator]


async def test_two_workers_on_one_file_never_claim_the_same_entry(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with SQLiteKnowledgeStore(path) as first, SQLiteKnowledgeStore(path) as second:
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


async def test_migrate_knowledge_lists_then_applies_by_url(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    url = f"sqlite:///{path}"
    assert await migrate_knowledge(url, dry_run=True) == ["m001_knowledge_initial", "m002_knowledge_open_outbox", "m003_knowledge_pages_by_node",
                                                            "m004_knowledge_unowned_speaker_facts",
                     "m005_knowledge_search_index"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0  # only read
    assert await migrate_knowledge(url) == ["m001_knowledge_initial", "m002_knowledge_open_outbox", "m003_knowledge_pages_by_node",
                                            "m004_knowledge_unowned_speaker_facts",
                     "m005_knowledge_search_index"]
    assert await migrate_knowledge(url) == [] and await migrate_knowledge(url, dry_run=True) == []
    async with SQLiteKnowledgeStore(path) as store:
        await store.create_node("Jane", "person", RES, **ACT)
    assert await migrate_knowledge("memory://") == []
    with pytest.raises(ConfigError):
        await migrate_knowledge("ftp://nowhere")
