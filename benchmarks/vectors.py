"""Benchmark obsmem.vectors: top-10 query latency and recall of the shipped indexes.

Synthetic 384-d data shaped like sentence embeddings: unit vectors scattered around
``--clusters`` random centres, so neighbours are near-ties as in real memory (many facts
about the same topic). For each size in ``--sizes`` (default 10,000 and 100,000) it builds:

* ``InMemoryVectorIndex`` — exact numpy search, nothing persisted;
* ``SQLiteVectorIndex`` — the same search over vectors persisted in a SQLite file in a
  temporary folder: insert time (``upsert_many`` in chunks of ``--chunk``, one durable
  transaction each), file size, the cold first search after reopening (reads every row),
  then warm queries;

and asks ``--queries`` held-out queries (same distribution, not in the index) for their
top 10 through the async API, reporting p50/p95 latency and **recall@10 against a float64
full sort** of all scores. Exact search should score 1.000; anything less is a bug. Two
namespace-filtered runs show the cost of scoping a search to 10 % and 1 % of the vectors.
Two raw lines give the floor the indexes are compared with: ``X @ q`` (threaded BLAS) and
``np.einsum`` (one thread, what the indexes use), each followed by ``argpartition``.

    .venv/bin/python benchmarks/vectors.py [--json out.json] [--sizes 10000,100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import percentile
from rich.console import Console
from rich.table import Table

from obsmem.vectors import InMemoryVectorIndex, SQLiteVectorIndex, VectorHit, VectorIndex

DIMENSIONS = 384
K = 10
Matrix = npt.NDArray[np.float32]


def clustered(count: int, centres: Matrix, rng: np.random.Generator, spread: float) -> Matrix:
    """Unit vectors near randomly chosen centres (noise of norm about ``spread``)."""
    picks = rng.integers(0, centres.shape[0], size=count)
    noise = rng.standard_normal((count, DIMENSIONS)).astype(np.float32) * np.float32(
        spread / np.sqrt(DIMENSIONS)
    )
    points: Matrix = centres[picks] + noise
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


def namespace_of(i: int) -> str:
    """``res:R/thread:T``: 10 resources of 10 threads each, so ``res:3/`` is 10 %, a thread 1 %."""
    return f"res:{i % 10}/thread:{i % 100}"


def reference_top(
    vectors: Matrix, queries: Matrix, rows: npt.NDArray[np.intp] | None = None
) -> list[set[int]]:
    """The true top-10 row numbers per query, by a float64 full sort."""
    base = vectors.astype(np.float64) if rows is None else vectors[rows].astype(np.float64)
    scores = queries.astype(np.float64) @ base.T
    order = np.argsort(-scores, axis=1)[:, :K]
    if rows is not None:
        order = rows[order]
    return [{int(i) for i in row} for row in order]


async def timed_queries(
    search: Callable[[Matrix], Awaitable[list[VectorHit]]], queries: Matrix
) -> tuple[list[float], list[list[VectorHit]]]:
    latencies, results = [], []
    for query in queries:
        start = time.perf_counter()
        hits = await search(query)
        latencies.append((time.perf_counter() - start) * 1000)
        results.append(hits)
    return latencies, results


def recall(results: list[list[VectorHit]], truth: list[set[int]]) -> float:
    found = sum(len({int(hit.key) for hit in hits} & expected) for hits, expected in zip(results, truth))
    return found / (K * len(truth))


def summary(label: str, latencies: list[float], recall_at_10: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "index": label,
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "recall_at_10": recall_at_10,
        **extra,
    }


async def measure_index(
    label: str, index: VectorIndex, vectors: Matrix, queries: Matrix, truth: list[set[int]]
) -> dict[str, Any]:
    async def search(query: Matrix) -> list[VectorHit]:
        return await index.search(query, K)

    latencies, results = await timed_queries(search, queries)
    return summary(label, latencies, recall(results, truth))


async def measure_size(size: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed + size)
    centres = rng.standard_normal((args.clusters, DIMENSIONS)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = clustered(size, centres, rng, args.spread)
    queries = clustered(args.queries, centres, rng, args.spread)
    keys = [str(i) for i in range(size)]
    namespaces = [namespace_of(i) for i in range(size)]
    truth = reference_top(vectors, queries)
    rows: list[dict[str, Any]] = []

    # The floor: scores and argpartition, no index around it; BLAS (threaded) and einsum (not).
    floors: tuple[tuple[str, Callable[[Matrix], Matrix]], ...] = (
        ("raw numpy X @ q (BLAS) + argpartition", lambda query: vectors @ query),
        ("raw numpy einsum + argpartition", lambda query: np.einsum("ij,j->i", vectors, query)),
    )
    for label, score in floors:
        latencies = []
        raw_results = []
        for query in queries:
            start = time.perf_counter()
            scores = score(query)
            top = np.argpartition(-scores, K - 1)[:K]
            latencies.append((time.perf_counter() - start) * 1000)
            raw_results.append([VectorHit(str(int(i)), float(scores[i]), "") for i in top])
        rows.append(summary(label, latencies, recall(raw_results, truth)))

    memory = InMemoryVectorIndex(DIMENSIONS, space="synthetic")
    start = time.perf_counter()
    for low in range(0, size, args.chunk):
        await memory.upsert_many(
            keys[low : low + args.chunk], vectors[low : low + args.chunk], namespaces[low : low + args.chunk]
        )
    insert_s = time.perf_counter() - start
    rows.append(
        {**await measure_index("InMemoryVectorIndex", memory, vectors, queries, truth), "insert_s": insert_s}
    )

    for prefix, share in (("res:3/", "10 %"), ("res:3/thread:13", "1 %")):
        matching = np.flatnonzero(np.array([ns.startswith(prefix) for ns in namespaces]))
        filtered_truth = reference_top(vectors, queries, matching)

        async def filtered(query: Matrix, prefix: str = prefix) -> list[VectorHit]:
            return await memory.search(query, K, namespace_prefix=prefix)

        latencies, results = await timed_queries(filtered, queries)
        rows.append(
            summary(f"InMemoryVectorIndex, namespace {share}", latencies, recall(results, filtered_truth))
        )
    await memory.close()

    path = workdir / f"vectors-{size}.db"
    index = SQLiteVectorIndex(path, dimensions=DIMENSIONS, space="synthetic")
    start = time.perf_counter()
    for low in range(0, size, args.chunk):
        await index.upsert_many(
            keys[low : low + args.chunk], vectors[low : low + args.chunk], namespaces[low : low + args.chunk]
        )
    insert_s = time.perf_counter() - start
    await index.close()
    file_mb = sum(p.stat().st_size for p in workdir.glob(f"{path.name}*")) / 1e6

    reopened = SQLiteVectorIndex(path, dimensions=DIMENSIONS, space="synthetic")
    start = time.perf_counter()
    first = await reopened.search(queries[0], K)
    cold_first_search_s = time.perf_counter() - start
    assert {int(hit.key) for hit in first} == truth[0]
    rows.append(
        {
            **await measure_index("SQLiteVectorIndex (warm)", reopened, vectors, queries, truth),
            "insert_s": insert_s,
            "file_mb": file_mb,
            "cold_first_search_s": cold_first_search_s,
        }
    )
    await reopened.close()
    return {"vectors": size, "dimensions": DIMENSIONS, "queries": args.queries, "k": K, "rows": rows}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(part) for part in args.sizes.split(",") if part]
    with tempfile.TemporaryDirectory(prefix="obsmem-vectors-bench-") as folder:
        return {
            "clusters": args.clusters,
            "spread": args.spread,
            "sizes": [await measure_size(size, args, Path(folder)) for size in sizes],
        }


def render(results: dict[str, Any]) -> None:
    console = Console() if sys.stdout.isatty() else Console(width=130)
    for block in results["sizes"]:
        table = Table(
            title=f"Top-{block['k']} search, {block['vectors']:,} × {block['dimensions']}-d vectors, "
            f"{block['queries']} queries ({results['clusters']} clusters)"
        )
        for column in ("index", "p50", "p95", "recall@10", "insert", "file", "cold first search"):
            table.add_column(column, justify="left" if column == "index" else "right")
        for row in block["rows"]:
            table.add_row(
                row["index"],
                f"{row['p50_ms']:.2f} ms",
                f"{row['p95_ms']:.2f} ms",
                f"{row['recall_at_10']:.3f}",
                f"{row['insert_s']:.2f} s" if "insert_s" in row else "",
                f"{row['file_mb']:.0f} MB" if "file_mb" in row else "",
                f"{row['cold_first_search_s'] * 1000:.0f} ms" if "cold_first_search_s" in row else "",
            )
        console.print(table)
    console.print(
        "recall@10 is measured against a float64 full sort; the namespace rows against the same sort restricted to the namespace."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated index sizes")
    parser.add_argument("--queries", type=int, default=200, help="queries per size")
    parser.add_argument("--clusters", type=int, default=200, help="cluster centres in the synthetic data")
    parser.add_argument("--spread", type=float, default=1.0, help="noise norm around each centre")
    parser.add_argument("--chunk", type=int, default=5000, help="vectors per upsert_many call")
    parser.add_argument("--seed", type=int, default=3, help="data seed")
    args = parser.parse_args()
    results = asyncio.run(measure(args))
    render(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
