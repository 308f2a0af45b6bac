"""What only the PostgreSQL index has: a database shared by objects and processes, two layouts."""

from __future__ import annotations

import random
import sys

import anyio
import numpy as np
import psycopg
import pytest

from obsmem.errors import ConfigError, StorageError
from obsmem.vectors import PostgresVectorIndex
from obsmem.vectors.postgres import POSTGRES_VECTOR_MIGRATIONS, VECTOR_MIGRATIONS_TABLE

from ..postgres_fixtures import PostgresServer, database_url

pytestmark = pytest.mark.anyio

DIMS = 8
LAYOUTS = [True, False]
LAYOUT_IDS = ["pgvector", "array"]


def basis(i: int) -> np.ndarray:
    row = np.zeros(DIMS, dtype=np.float32)
    row[i] = 1.0
    return row


@pytest.mark.parametrize("use_pgvector", LAYOUTS, ids=LAYOUT_IDS)
async def test_vectors_survive_reopen(postgres_url: str, use_pgvector: bool) -> None:
    first = await PostgresVectorIndex.open(postgres_url, DIMS, space="s", use_pgvector=use_pgvector)
    await first.upsert_many(["a", "b"], np.stack([basis(0), basis(1)]), ["ns/1", "ns/2"])
    await first.upsert("c", basis(2) + basis(0), "ns/1")
    await first.delete("b")
    await first.close()

    second = PostgresVectorIndex(postgres_url, DIMS, space="s")  # the layout is remembered
    assert await second.layout() == ("pgvector" if use_pgvector else "array")
    assert await second.count("ns/") == 2
    hits = await second.search(basis(0), 5)
    assert [(h.key, h.namespace) for h in hits] == [("a", "ns/1"), ("c", "ns/1")]
    assert hits[1].score == pytest.approx(1 / np.sqrt(2), abs=1e-6)
    await second.close()


async def test_two_index_objects_see_each_others_writes(postgres_url: str) -> None:
    reader = await PostgresVectorIndex.open(postgres_url, DIMS)
    writer = await PostgresVectorIndex.open(postgres_url, DIMS)
    await reader.upsert("mine", basis(0))
    assert [h.key for h in await writer.search(basis(1), 5)] == ["mine"]
    await writer.upsert("theirs", basis(1))
    await writer.delete("mine")
    assert [h.key for h in await reader.search(basis(1), 5)] == ["theirs"]
    assert await writer.delete_namespace("") == 1
    assert await reader.count() == 0
    await reader.close()
    await writer.close()


@pytest.mark.parametrize("use_pgvector", LAYOUTS, ids=LAYOUT_IDS)
async def test_like_wildcards_in_a_prefix_match_only_themselves(
    postgres_url: str, use_pgvector: bool
) -> None:
    index = await PostgresVectorIndex.open(postgres_url, DIMS, use_pgvector=use_pgvector)
    namespaces = ["a%b/1", "axb/1", "a_b/1", "ayb/1", "a\\b/1", "a\\\\b/1", "a%", "a"]
    await index.upsert_many([f"k{i}" for i in range(len(namespaces))], np.tile(basis(0), (8, 1)), namespaces)
    assert [h.namespace for h in await index.search(basis(0), 10, namespace_prefix="a%")] == ["a%b/1", "a%"]
    assert [h.namespace for h in await index.search(basis(0), 10, namespace_prefix="a_b")] == ["a_b/1"]
    assert await index.count("a\\b") == 1
    assert await index.count("%") == 0
    assert await index.count("_") == 0
    assert await index.delete_namespace("a_") == 1
    assert await index.delete_namespace("a%") == 2
    assert await index.count() == 5
    await index.close()


@pytest.mark.parametrize("use_pgvector", LAYOUTS, ids=LAYOUT_IDS)
async def test_ties_break_by_code_point_whatever_the_collation(postgres_url: str, use_pgvector: bool) -> None:
    index = await PostgresVectorIndex.open(postgres_url, DIMS, use_pgvector=use_pgvector)
    keys = ["b", "B", "a", "_", "é", "Z"]
    await index.upsert_many(keys, np.tile(basis(3), (len(keys), 1)))
    assert [h.key for h in await index.search(basis(3), 10)] == sorted(keys)
    await index.close()


async def test_array_fallback_answers_like_pgvector(postgres_url: str) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((200, DIMS)).astype(np.float32)
    vectors[5] = 0.0
    keys = [f"v{i:03d}" for i in range(200)]
    namespaces = [f"res:{i % 4}/thread:{i % 7}" for i in range(200)]
    with_pgvector = await PostgresVectorIndex.open(postgres_url, DIMS, name="pgv", use_pgvector=True)
    with_arrays = await PostgresVectorIndex.open(postgres_url, DIMS, name="arr", use_pgvector=False)
    assert (await with_pgvector.layout(), await with_arrays.layout()) == ("pgvector", "array")
    for index in (with_pgvector, with_arrays):
        await index.upsert_many(keys, vectors, namespaces)
    for seed, prefix in enumerate(["", "res:1/", "res:2/thread:3", "res:9"]):
        query = np.random.default_rng(100 + seed).standard_normal(DIMS)
        expected = await with_pgvector.search(query, 15, namespace_prefix=prefix)
        got = await with_arrays.search(query, 15, namespace_prefix=prefix)
        assert [(h.key, h.namespace) for h in got] == [(h.key, h.namespace) for h in expected]
        assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-6)
        assert await with_arrays.count(prefix) == await with_pgvector.count(prefix)
    await with_pgvector.close()
    await with_arrays.close()


@pytest.mark.parametrize(
    ("dimensions", "space", "use_pgvector", "option"),
    [
        (DIMS * 2, "s", None, "vectors.dimensions"),
        (DIMS, "other", None, "vectors.space"),
        (DIMS, "s", False, "vectors.use_pgvector"),
    ],
)
async def test_reopening_with_another_size_embedder_or_layout_is_refused(
    postgres_url: str, dimensions: int, space: str, use_pgvector: bool | None, option: str
) -> None:
    await (await PostgresVectorIndex.open(postgres_url, DIMS, space="s", use_pgvector=True)).close()
    with pytest.raises(ConfigError) as caught:
        await PostgresVectorIndex.open(postgres_url, dimensions, space=space, use_pgvector=use_pgvector)
    assert caught.value.option == option


async def test_named_indexes_share_a_database_independently(postgres_url: str) -> None:
    small = await PostgresVectorIndex.open(postgres_url, DIMS, space="lexical", name="knowledge")
    big = await PostgresVectorIndex.open(postgres_url, DIMS * 2, space="minilm", name="groups")
    await small.upsert("k", basis(0))
    await big.upsert("k", np.ones(DIMS * 2))
    assert (await small.count(), await big.count()) == (1, 1)
    await big.delete("k")
    assert [h.key for h in await small.search(basis(0), 3)] == ["k"]
    await small.close()
    await big.close()


async def test_concurrent_creators_on_a_bare_database_all_succeed(postgres_server: PostgresServer) -> None:
    """A database made from template0 has neither the tables nor the extension: auto mode creates both."""
    bare = f"obsmem_bare_vectors_{id(postgres_server)}"
    with postgres_server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{bare}" TEMPLATE template0')
    try:
        url = database_url(postgres_server.url, bare)
        opened: list[PostgresVectorIndex] = []

        async def open_one(i: int) -> None:
            opened.append(await PostgresVectorIndex.open(url, DIMS, name=f"n{i % 3}"))

        async with anyio.create_task_group() as group:
            for i in range(8):
                group.start_soon(open_one, i)
        assert {await index.layout() for index in opened} == {"pgvector"}
        await opened[0].upsert("x", basis(1))
        counts = {index.name: await index.count() for index in opened if index is not opened[0]}
        assert counts == {name: int(name == opened[0].name) for name in counts}
        for index in opened:
            await index.close()
    finally:
        postgres_server.drop_database(bare)


async def test_closed_index_refuses_work(postgres_url: str) -> None:
    index = await PostgresVectorIndex.open(postgres_url, DIMS)
    await index.close()
    await index.close()  # twice is fine
    with pytest.raises(StorageError, match="closed"):
        await index.search(basis(0), 1)


async def test_unreachable_server_is_a_storage_error_without_the_password(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        port = conn.info.port
    url = f"postgresql://someone:hunter2@127.0.0.1:{port}/no_such_database_here"
    index = PostgresVectorIndex(url, DIMS)
    with pytest.raises(StorageError, match="Cannot connect") as caught:
        await index.count()
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(index)
    await index.close()


async def test_approximate_mode_builds_an_hnsw_index_the_planner_uses(postgres_url: str) -> None:
    index = await PostgresVectorIndex.open(postgres_url, DIMS, name="ann", approximate=True)
    vectors = np.random.default_rng(8).standard_normal((100, DIMS)).astype(np.float32)
    await index.upsert_many([f"v{i}" for i in range(100)], vectors)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (index.hnsw_index_name,)
        ).fetchone()
        assert row is not None and "hnsw" in row[0] and "vector_ip_ops" in row[0] and "'ann'" in row[0]
        # At 100 rows a sort is rightly cheaper; forbid it to prove the query matches the index.
        conn.execute("SET enable_sort = off")
        literal = "[" + ",".join("0.5" for _ in range(DIMS)) + "]"
        plan = psycopg.ClientCursor(conn).execute(
            b"EXPLAIN " + index.approximate_query().as_bytes(conn), (literal, "%", literal, 5)
        )
        assert index.hnsw_index_name in "\n".join(str(line[0]) for line in plan.fetchall())
    [top] = await index.search(vectors[42], 1)
    assert top.key == "v42"
    assert top.score == pytest.approx(1.0, abs=1e-6)
    await index.close()


async def test_approximate_search_falls_back_to_exact_when_a_filter_leaves_fewer_than_k(
    postgres_url: str,
) -> None:
    # Forbidding sorts makes the planner scan the HNSW index even at this size.
    forced_hnsw = postgres_url + "?options=-c%20enable_sort%3Doff"
    index = await PostgresVectorIndex.open(forced_hnsw, DIMS, approximate=True)
    vectors = np.random.default_rng(9).standard_normal((60, DIMS)).astype(np.float32)
    namespaces = ["rare/" if i in (3, 30, 57) else "common/" for i in range(60)]
    await index.upsert_many([f"v{i:02d}" for i in range(60)], vectors, namespaces)
    query = vectors[30]
    hits = await index.search(query, 10, namespace_prefix="rare/")
    normalised = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = sorted([3, 30, 57], key=lambda i: -float(normalised[i] @ (query / np.linalg.norm(query))))
    assert [h.key for h in hits] == [f"v{i:02d}" for i in expected]
    assert await index.search(query, 5, namespace_prefix="none/") == []
    [top] = await index.search(query, 1)
    assert top.key == "v30"
    await index.close()


async def test_approximate_mode_on_arrays_stays_exact(postgres_url: str) -> None:
    index = await PostgresVectorIndex.open(postgres_url, DIMS, use_pgvector=False, approximate=True)
    await index.upsert_many([f"t{i}" for i in (3, 1, 4, 0, 2)], np.tile(basis(2), (5, 1)))
    assert [h.key for h in await index.search(basis(2), 3)] == ["t0", "t1", "t2"]
    await index.close()


async def test_importing_obsmem_vectors_does_not_import_psycopg() -> None:
    script = "import sys, obsmem.vectors; assert 'psycopg' not in sys.modules, 'psycopg was imported'"
    await anyio.run_process([sys.executable, "-c", script], check=True)


@pytest.mark.parametrize("use_pgvector", LAYOUTS, ids=LAYOUT_IDS)
async def test_search_replace_and_delete_agree_with_a_cosine_ranking(
    shared_vector_database_url: str, fresh_index_name: str, use_pgvector: bool
) -> None:
    """The scenario PostgresStore's retired vector methods were held to, on the one PostgreSQL index."""
    rng = random.Random(7)
    items = [(f"v{i}", [rng.uniform(-1, 1) for _ in range(DIMS)]) for i in range(120)]
    index = await PostgresVectorIndex.open(
        shared_vector_database_url, DIMS, name=fresh_index_name, use_pgvector=use_pgvector
    )
    await index.upsert_many([key for key, _ in items], np.array([vector for _, vector in items]), "notes/")
    await index.upsert("x", [1.0] * DIMS, "other/")
    query = items[17][1]
    expected = sorted(items, key=lambda item: -float(np.dot(unit(item[1]), unit(query))))[:5]
    hits = await index.search(query, 5, namespace_prefix="notes/")
    assert [h.key for h in hits] == [key for key, _ in expected]
    assert hits[0].key == "v17" and hits[0].score == pytest.approx(1.0, abs=1e-6)
    assert all(h.key != "x" for h in await index.search([1.0] * DIMS, 200, namespace_prefix="notes/"))
    await index.upsert("v17", [-x for x in query], "notes/")  # replaced in place
    assert (await index.search(query, 1, namespace_prefix="notes/"))[0].key != "v17"
    assert (await index.delete("v17"), await index.delete("missing")) == (True, False)
    assert await index.count("notes/") == 119
    await index.close()


def unit(vector: list[float]) -> np.ndarray:
    row = np.asarray(vector, dtype=np.float64)
    return row / np.linalg.norm(row)


async def test_the_tables_are_a_migrated_schema_of_their_own(postgres_url: str) -> None:
    await (await PostgresVectorIndex.open(postgres_url, DIMS)).close()
    with psycopg.connect(postgres_url) as conn:
        steps = [row[0] for row in conn.execute(f"SELECT name FROM {VECTOR_MIGRATIONS_TABLE} ORDER BY name")]
        store_steps = [row[0] for row in conn.execute("SELECT name FROM _obsmem_migrations ORDER BY name")]
    assert steps == POSTGRES_VECTOR_MIGRATIONS.names() == ["m001_vector_tables", "m002_pgvector_rows"]
    assert store_steps == [
        "m001_initial", "m002_vectors", "m003_dead_work", "m004_model_calls", "m005_threads_by_creation",
        "m006_thread_activity", "m007_forgotten_ids",
    ]  # the store's schema is untouched
