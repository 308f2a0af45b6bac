"""What only the SQLite index has: a file that survives reopening and is shared safely."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

from obsmem.errors import ConfigError, MigrationError, StorageError
from obsmem.storage import SQLiteStore
from obsmem.storage.migrations import MIGRATIONS_TABLE, SQLITE_MIGRATIONS
from obsmem.vectors import SQLiteVectorIndex
from obsmem.vectors.sqlite import SQLITE_VECTOR_MIGRATIONS, VECTOR_MIGRATIONS_TABLE

pytestmark = pytest.mark.anyio

DIMS = 8


def basis(i: int) -> np.ndarray:
    row = np.zeros(DIMS, dtype=np.float32)
    row[i] = 1.0
    return row


async def test_vectors_survive_reopen_and_load_lazily(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    first = SQLiteVectorIndex(path, dimensions=DIMS, space="s")
    await first.upsert_many(["a", "b"], np.stack([basis(0), basis(1)]), ["ns/1", "ns/2"])
    await first.upsert("c", basis(2) + basis(0), "ns/1")
    await first.delete("b")
    await first.close()

    second = SQLiteVectorIndex(path, dimensions=DIMS, space="s")
    assert await second.count("ns/") == 2
    assert not second.loaded  # count came from SQL
    hits = await second.search(basis(0), 5)
    assert second.loaded
    assert [(h.key, h.namespace) for h in hits] == [("a", "ns/1"), ("c", "ns/1")]
    assert hits[1].score == pytest.approx(1 / np.sqrt(2), abs=1e-6)
    await second.close()


async def test_writes_after_loading_reach_both_memory_and_file(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    index = await SQLiteVectorIndex.open(path, dimensions=DIMS)
    await index.upsert("a", basis(0))
    await index.load()
    await index.upsert("b", basis(1), "n/")
    await index.delete_namespace("")  # everything
    await index.upsert("c", basis(2), "n/")
    assert [h.key for h in await index.search(basis(2), 5)] == ["c"]
    await index.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT key, namespace FROM obsmem_vectors").fetchall() == [("c", "n/")]


async def test_another_connections_writes_are_seen(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    reader = await SQLiteVectorIndex.open(path, dimensions=DIMS)
    writer = await SQLiteVectorIndex.open(path, dimensions=DIMS)
    await reader.upsert("mine", basis(0))
    assert [h.key for h in await reader.search(basis(1), 5)] == ["mine"]  # loaded now
    await writer.upsert("theirs", basis(1))
    await writer.delete("mine")
    assert [h.key for h in await reader.search(basis(1), 5)] == ["theirs"]
    await reader.close()
    await writer.close()


async def test_a_write_from_another_process_is_durable_and_visible(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    script = (
        "import asyncio, sys\n"
        "from obsmem.vectors import SQLiteVectorIndex\n"
        "async def main():\n"
        f"    index = SQLiteVectorIndex(sys.argv[1], dimensions={DIMS}, space='s')\n"
        f"    await index.upsert('from-child', [0, 0, 0, 1, 0, 0, 0, 0], 'child/')\n"
        "    await index.close()\n"
        "asyncio.run(main())\n"
    )
    await anyio.run_process([sys.executable, "-c", script, str(path)], check=True)
    index = SQLiteVectorIndex(path, dimensions=DIMS, space="s")
    [hit] = await index.search(basis(3), 1)
    assert (hit.key, hit.namespace) == ("from-child", "child/")
    await index.close()


@pytest.mark.parametrize(
    ("dimensions", "space", "option"),
    [(DIMS * 2, "s", "vectors.dimensions"), (DIMS, "other", "vectors.space")],
)
async def test_reopening_with_another_size_or_embedder_is_refused(
    tmp_path: Path, dimensions: int, space: str, option: str
) -> None:
    path = tmp_path / "v.db"
    await (await SQLiteVectorIndex.open(path, dimensions=DIMS, space="s")).close()
    with pytest.raises(ConfigError) as caught:
        await SQLiteVectorIndex.open(path, dimensions=dimensions, space=space)
    assert caught.value.option == option


async def test_named_indexes_share_a_file_independently(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    small = await SQLiteVectorIndex.open(path, dimensions=DIMS, space="lexical", name="knowledge")
    big = await SQLiteVectorIndex.open(path, dimensions=DIMS * 2, space="minilm", name="groups")
    await small.upsert("k", basis(0))
    await big.upsert("k", np.ones(DIMS * 2))
    assert (await small.count(), await big.count()) == (1, 1)
    await big.delete("k")
    assert [h.key for h in await small.search(basis(0), 3)] == ["k"]
    await small.close()
    await big.close()


async def test_closed_index_refuses_work(tmp_path: Path) -> None:
    index = await SQLiteVectorIndex.open(tmp_path / "v.db", dimensions=DIMS)
    await index.close()
    await index.close()  # twice is fine
    with pytest.raises(StorageError, match="closed"):
        await index.search(basis(0), 1)


async def test_damaged_row_is_a_storage_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    index = await SQLiteVectorIndex.open(path, dimensions=DIMS)
    await index.upsert("good", basis(0))
    await index.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO obsmem_vectors VALUES ('default', 'bad', '', x'0000')")
    index = SQLiteVectorIndex(path, dimensions=DIMS)
    with pytest.raises(StorageError, match="'bad'.*Delete that key"):
        await index.search(basis(0), 1)
    assert await index.delete("bad") is True
    assert [h.key for h in await index.search(basis(0), 1)] == ["good"]
    await index.close()


async def test_not_a_database_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    path.write_bytes(b"this is not sqlite" * 100)
    index = SQLiteVectorIndex(path, dimensions=DIMS)
    with pytest.raises(StorageError, match="writable SQLite database"):
        await index.count()
    await index.close()


async def test_the_tables_are_a_migrated_schema_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    async with SQLiteStore(path) as store:  # the message store in the same file
        await store.get_thread("t1")
    index = await SQLiteVectorIndex.open(path, dimensions=DIMS)
    await index.close()
    with sqlite3.connect(path) as conn:
        vector_steps = [row[0] for row in conn.execute(f"SELECT name FROM {VECTOR_MIGRATIONS_TABLE}")]
        store_steps = [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")]
    assert vector_steps == SQLITE_VECTOR_MIGRATIONS.names() == ["m001_vector_tables"]
    assert store_steps == SQLITE_MIGRATIONS.names()  # the store's steps are untouched


async def test_a_file_from_before_the_vector_migrations_is_adopted(tmp_path: Path) -> None:
    """Files written when the index created its tables itself: the step records them, data kept."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE obsmem_vector_indexes (name TEXT PRIMARY KEY, dimensions, space)")
        conn.execute("CREATE TABLE obsmem_vectors (index_name, key, namespace, vector, UNIQUE (index_name, key))")
        conn.execute("INSERT INTO obsmem_vector_indexes VALUES ('default', ?, 's')", (DIMS,))
        conn.execute("INSERT INTO obsmem_vectors VALUES ('default', 'old', 'n/', ?)", (basis(3).tobytes(),))
    index = await SQLiteVectorIndex.open(path, dimensions=DIMS, space="s")
    assert [h.key for h in await index.search(basis(3), 1)] == ["old"]
    await index.close()
    with sqlite3.connect(path) as conn:
        steps = [row[0] for row in conn.execute(f"SELECT name FROM {VECTOR_MIGRATIONS_TABLE}")]
    assert steps == ["m001_vector_tables"]


async def test_a_file_from_a_newer_obsmem_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    await (await SQLiteVectorIndex.open(path, dimensions=DIMS)).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"INSERT INTO {VECTOR_MIGRATIONS_TABLE} VALUES ('m999_future', 'x')")
    index = SQLiteVectorIndex(path, dimensions=DIMS)
    with pytest.raises(MigrationError, match="newer obsmem"):
        await index.count()
    await index.close()
