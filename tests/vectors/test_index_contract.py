"""Behaviour every vector index shares, run against the in-memory, SQLite and PostgreSQL indexes.

PostgreSQL runs twice: with pgvector and with its plain-array fallback, each test under a fresh
index name in one shared database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
import pytest

from obsmem.errors import InvalidInputError
from obsmem.vectors import InMemoryVectorIndex, PostgresVectorIndex, SQLiteVectorIndex, VectorIndex

pytestmark = pytest.mark.anyio

DIMS = 16


def unit(seed: int) -> np.ndarray:
    row = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    return row / np.linalg.norm(row)


def basis(i: int) -> np.ndarray:
    row = np.zeros(DIMS, dtype=np.float32)
    row[i] = 1.0
    return row


@pytest.fixture(params=["memory", "sqlite", "postgres-pgvector", "postgres-array"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    made: VectorIndex
    if request.param == "memory":
        made = InMemoryVectorIndex(DIMS, space="test-space")
    elif request.param == "sqlite":
        made = await SQLiteVectorIndex.open(tmp_path / "vectors.db", dimensions=DIMS, space="test-space")
    else:
        made = await PostgresVectorIndex.open(
            request.getfixturevalue("shared_vector_database_url"),
            DIMS,
            name=request.getfixturevalue("fresh_index_name"),
            space="test-space",
            use_pgvector=request.param == "postgres-pgvector",
        )
    assert isinstance(made, VectorIndex)
    yield made
    await made.close()


async def test_empty_index_finds_nothing(index: VectorIndex) -> None:
    assert await index.search(unit(1), 10) == []
    assert await index.count() == 0
    assert await index.delete("absent") is False


async def test_search_ranks_by_cosine_and_scales_are_ignored(index: VectorIndex) -> None:
    query = basis(0)
    await index.upsert("far", basis(1))
    await index.upsert("near", 5.0 * (basis(0) + 0.1 * basis(1)))  # stored normalised
    await index.upsert("exact", 0.5 * basis(0))
    hits = await index.search(query, 2)
    assert [h.key for h in hits] == ["exact", "near"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)
    assert hits[1].score == pytest.approx(1.0 / np.sqrt(1.01), abs=1e-6)


async def test_k_larger_than_the_index_returns_everything_in_order(index: VectorIndex) -> None:
    for i in range(5):
        await index.upsert(f"k{i}", basis(0) + i * basis(1))
    hits = await index.search(basis(0), 50)
    assert [h.key for h in hits] == ["k0", "k1", "k2", "k3", "k4"]
    assert await index.search(basis(0), 0) == []


async def test_ties_break_by_key(index: VectorIndex) -> None:
    await index.upsert_many([f"t{i}" for i in (3, 1, 4, 0, 2)], np.tile(basis(2), (5, 1)))
    assert [h.key for h in await index.search(basis(2), 3)] == ["t0", "t1", "t2"]


async def test_upsert_replaces_vector_and_namespace(index: VectorIndex) -> None:
    await index.upsert("a", basis(0), "resource:r1/thread:t1")
    await index.upsert("a", basis(3), "resource:r2/")
    assert await index.count() == 1
    [hit] = await index.search(basis(3), 5)
    assert (hit.key, hit.namespace) == ("a", "resource:r2/")
    assert hit.score == pytest.approx(1.0, abs=1e-6)
    assert await index.search(basis(0), 5, namespace_prefix="resource:r1/") == []


async def test_namespace_prefix_filters_search_count_and_delete(index: VectorIndex) -> None:
    await index.upsert_many(
        ["a1", "a2", "b1", "c1"],
        np.stack([basis(0), basis(0) + basis(1), basis(0), basis(0)]),
        ["res:alice/thread:1", "res:alice/thread:2", "res:bob/thread:1", "res:alice-other/"],
    )
    assert {h.key for h in await index.search(basis(0), 10, namespace_prefix="res:alice/")} == {"a1", "a2"}
    assert [h.key for h in await index.search(basis(0), 10, namespace_prefix="res:alice/thread:2")] == ["a2"]
    assert await index.search(basis(0), 10, namespace_prefix="res:carol/") == []
    assert await index.count("res:alice") == 3
    assert await index.count("res:alice/") == 2
    assert await index.delete_namespace("res:alice/") == 2
    assert {h.key for h in await index.search(basis(0), 10)} == {"b1", "c1"}


async def test_namespace_filter_with_few_matches_among_many_rows(index: VectorIndex) -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((400, DIMS)).astype(np.float32)
    namespaces = ["big/" if i % 50 else "small/" for i in range(400)]
    await index.upsert_many([f"v{i}" for i in range(400)], vectors, namespaces)
    query = vectors[100] + 0.01
    hits = await index.search(query, 3, namespace_prefix="small/")
    small = [i for i in range(400) if namespaces[i] == "small/"]
    scores = {
        i: float(vectors[i] @ query / np.linalg.norm(vectors[i]) / np.linalg.norm(query)) for i in small
    }
    assert [h.key for h in hits] == [f"v{i}" for i in sorted(small, key=lambda i: -scores[i])[:3]]
    assert hits[0].key == "v100"


async def test_delete_removes_only_that_key(index: VectorIndex) -> None:
    await index.upsert_many(["x", "y", "z"], np.stack([basis(0), basis(1), basis(2)]))
    assert await index.delete("x") is True
    assert await index.delete("x") is False
    assert await index.count() == 2
    assert [h.key for h in await index.search(basis(2), 1)] == ["z"]  # z moved into x's row
    assert {h.key for h in await index.search(basis(0), 10)} == {"y", "z"}


async def test_exact_search_matches_a_full_sort(index: VectorIndex) -> None:
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((300, DIMS)).astype(np.float32)
    await index.upsert_many([f"v{i}" for i in range(300)], vectors)
    await index.delete("v7")
    normalised = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for seed in range(5):
        query = unit(100 + seed)
        order = [i for i in np.argsort(-(normalised @ query)) if i != 7][:10]
        assert [h.key for h in await index.search(query, 10)] == [f"v{i}" for i in order]


@pytest.mark.parametrize(
    "bad",
    [np.zeros(DIMS + 1), np.zeros((2, DIMS)), [1.0, 2.0], np.full(DIMS, np.nan)],
    ids=["too-long", "matrix", "short-list", "nan"],
)
async def test_bad_vectors_are_invalid_input(index: VectorIndex, bad: object) -> None:
    with pytest.raises(InvalidInputError):
        await index.upsert("k", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await index.search(bad, 3)  # type: ignore[arg-type]
    assert await index.count() == 0


async def test_dimension_mismatch_message_says_what_to_do(index: VectorIndex) -> None:
    with pytest.raises(InvalidInputError, match=f"holds {DIMS}-dimensional vectors; embed with the embedder"):
        await index.upsert("k", np.ones(384))


async def test_upsert_many_checks_its_arguments(index: VectorIndex) -> None:
    with pytest.raises(InvalidInputError, match="same key appears twice"):
        await index.upsert_many(["a", "a"], np.stack([basis(0), basis(1)]))
    with pytest.raises(InvalidInputError, match="expected \\(3, 16\\)"):
        await index.upsert_many(["a", "b", "c"], np.stack([basis(0), basis(1)]))
    with pytest.raises(InvalidInputError, match="one namespace per key"):
        await index.upsert_many(["a", "b"], np.stack([basis(0), basis(1)]), ["only-one"])
    with pytest.raises(InvalidInputError, match="k must be 0 or more"):
        await index.search(basis(0), -1)
    assert await index.count() == 0


async def test_zero_vector_is_stored_and_scores_zero(index: VectorIndex) -> None:
    await index.upsert("blank", np.zeros(DIMS))
    [hit] = await index.search(basis(0), 1)
    assert (hit.key, hit.score) == ("blank", 0.0)


async def test_concurrent_writers_and_readers_all_land(index: VectorIndex) -> None:
    async def write(i: int) -> None:
        await index.upsert(f"c{i}", unit(i), f"ns/{i % 3}")
        await index.search(unit(i), 3)

    async with anyio.create_task_group() as group:
        for i in range(40):
            group.start_soon(write, i)
    assert await index.count() == 40
    assert await index.count("ns/1") == 13
    [hit] = await index.search(unit(17), 1)
    assert (hit.key, hit.namespace) == ("c17", "ns/2")
