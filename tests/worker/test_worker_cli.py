"""``obsmem worker`` from the command line: it buffers queued work and indexes retrieval groups."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig, RetrievalConfig
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.storage import SQLiteStore
from obsmem.vectors import SQLiteVectorIndex


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=0.25, block_after=3.0),
        reflection=ReflectionConfig(observation_tokens=5_000),
        retrieval=RetrievalConfig(enabled=True, vector=True),
    )


async def application(db: Path, vectors: Path, turns: int) -> None:
    """The application side: queue mode, so every due buffer becomes a work item."""
    embedder = LexicalHashEmbedder()
    index = SQLiteVectorIndex(vectors, dimensions=embedder.dimensions, space=embedder.name)
    async with SQLiteStore(db) as store:
        memory = Memory(store, config=config(), clock=FakeClock(), background="queue",
                        embedder=embedder, vector_index=index)  # fmt: skip
        async with memory:
            for n in range(turns):
                text = f"Turn {n}: the Kestrel{n} budget is {n * 100} euros, review on day {n}."
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(text)])
                await turn.step([Message.assistant(f"Noted {n * 100} euros for Kestrel{n}.")])
                await turn.end()
    await index.close()


async def queued_and_indexed(db: Path, vectors: Path) -> tuple[int, int]:
    embedder = LexicalHashEmbedder()
    index = SQLiteVectorIndex(vectors, dimensions=embedder.dimensions, space=embedder.name)
    async with SQLiteStore(db) as store:
        waiting = len(await store.list_work())
    count = await index.count()
    await index.close()
    return waiting, count


def test_worker_command_buffers_queued_work_and_indexes_groups(tmp_path: Path) -> None:
    db, vectors, snapshot = tmp_path / "app.db", tmp_path / "vectors.db", tmp_path / "config.json"
    snapshot.write_text(json.dumps(config().snapshot()))
    asyncio.run(application(db, vectors, turns=10))
    waiting, indexed_before = asyncio.run(queued_and_indexed(db, vectors))
    assert waiting > 0  # the application queued work
    result = CliRunner().invoke(app, [
        "worker", "--store", f"sqlite:///{db}", "--config", str(snapshot), "--vectors", str(vectors),
        "--embedder", "lexical", "--exit-when-idle", "--poll", "0.01",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "completed" in result.output
    waiting, indexed_after = asyncio.run(queued_and_indexed(db, vectors))
    assert waiting == 0
    assert indexed_after > indexed_before  # the worker embedded the groups it buffered


def test_vector_retrieval_without_vectors_fails_in_one_line(tmp_path: Path) -> None:
    snapshot = tmp_path / "config.json"
    snapshot.write_text(json.dumps(config().snapshot()))
    result = CliRunner().invoke(app, ["worker", "--store", f"sqlite:///{tmp_path / 'x.db'}", "--config",
                                      str(snapshot), "--exit-when-idle"])  # fmt: skip
    assert result.exit_code == 1
    assert "--vectors" in result.output


def test_worker_indexes_groups_into_pgvector(tmp_path: Path, postgres_url: str) -> None:
    """The same, with the group vectors in PostgreSQL (pgvector) while the store stays SQLite."""
    from obsmem.vectors import PostgresVectorIndex

    db, snapshot = tmp_path / "app.db", tmp_path / "config.json"
    snapshot.write_text(json.dumps(config().snapshot()))
    asyncio.run(application(db, tmp_path / "app-vectors.db", turns=10))
    result = CliRunner().invoke(app, [
        "worker", "--store", f"sqlite:///{db}", "--config", str(snapshot), "--vectors", postgres_url,
        "--embedder", "lexical", "--exit-when-idle", "--poll", "0.01",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output

    async def indexed() -> int:
        embedder = LexicalHashEmbedder()
        index = PostgresVectorIndex(postgres_url, dimensions=embedder.dimensions, space=embedder.name)
        try:
            return await index.count("obsmem-groups/")
        finally:
            await index.close()

    assert asyncio.run(indexed()) > 0


def test_migrate_brings_a_sqlite_file_up_to_date_knowledge_included(tmp_path: Path) -> None:
    from obsmem.knowledge import Knowledge

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    dry = CliRunner().invoke(app, ["migrate", "--store", url, "--dry-run"])
    assert dry.exit_code == 0 and "m003_work_queue" in dry.output and "m001_knowledge_initial" in dry.output
    done = CliRunner().invoke(app, ["migrate", "--store", url])
    assert done.exit_code == 0 and "14 migrations applied" in done.output  # m009_forgotten_ids, m008_thread_activity, m004_dead_work (issue 22), m005_model_calls and m006_message_rev (issue 18), m002_knowledge_open_outbox, m003_knowledge_pages_by_node, m007_threads_by_creation, m004_knowledge_unowned_speaker_facts, m005_knowledge_search_index
    again = CliRunner().invoke(app, ["migrate", "--store", url])
    assert "0 migrations applied" in again.output

    async def use() -> str:
        async with Knowledge.sqlite(tmp_path / "fresh.db", actor="test") as knowledge:
            node = await knowledge.node("Jane", "person", "org:acme")
            return node.name

    assert asyncio.run(use()) == "Jane"  # the migrated tables are the ones the store uses
