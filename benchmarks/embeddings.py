"""Benchmark obsmem.embeddings: speed of the offline embedders and how well they match paraphrases.

For MiniLM (int8 ONNX, when the ``obsmem[embeddings]`` extra is installed) and the lexical
fallback it measures:

* **load** time (MiniLM: verify both sha256 digests, build the tokenizer and the session);
* **throughput**: sentences per second embedding 1,000 short sentences in one call (median
  of ``--repeats``);
* **single-sentence latency**: ``await embed([s])`` one sentence at a time, p50/p95 and mean
  over ``--single`` calls (this includes the hop to the worker thread);
* **paraphrase agreement** on 30 hand-written question → fact pairs worded differently (the
  question rarely shares a content word with its fact): acc@1 and acc@3 (is the right fact
  the nearest / among the 3 nearest of the 30), and the mean cosine of true pairs against
  the mean cosine of all other pairs.

``--threads`` sets MiniLM's onnxruntime threads (default 2, this machine's core count).
``--json PATH`` writes the same numbers.

    .venv/bin/python benchmarks/embeddings.py [--json out.json] [--threads 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import percentile
from rich.console import Console
from rich.table import Table

from obsmem.embeddings import Embedder, LexicalHashEmbedder, MiniLMEmbedder, minilm_available

# Question → fact pairs, worded so that lexical overlap does not give the answer away.
PARAPHRASE_PAIRS: tuple[tuple[str, str], ...] = (
    ("What is my dog called?", "The user has a golden retriever named Luna."),
    ("Which city do I live in now?", "The user relocated to Berlin last spring."),
    ("What food must I avoid?", "The user is allergic to peanuts."),
    ("When is my sister's wedding?", "The user's sister gets married on 14 June."),
    ("What do I do for a living?", "The user works as a nurse at the city hospital."),
    ("How do I commute?", "The user rides a bicycle to the office every morning."),
    ("What instrument am I learning?", "The user takes cello lessons on Thursdays."),
    ("Which foreign language am I studying?", "The user practises Japanese with a tutor."),
    ("What car do I drive?", "The user owns a blue 2019 Toyota Corolla."),
    ("Where did I go on holiday last summer?", "The user spent two weeks hiking in Portugal in August."),
    ("What is my partner's name?", "The user's wife is called Maria."),
    ("How many kids do I have?", "The user is a parent of three children."),
    ("What's my favourite film?", "The user loves The Godfather more than any other movie."),
    ("Which team do I support?", "The user is a lifelong Liverpool FC fan."),
    ("What did the doctor tell me?", "The physician advised the user to cut down on salt."),
    ("When does my lease end?", "The user's apartment rental contract expires in March."),
    ("What am I reading at the moment?", "The user is halfway through a novel by Haruki Murakami."),
    ("What's my budget for the new laptop?", "The user can spend at most 1,200 euros on a computer."),
    ("Do I drink coffee?", "The user gave up caffeine and only has herbal tea."),
    ("What is my manager's name?", "The user reports to a boss named Daniel."),
    ("Which programming language do I use at work?", "The user writes Rust for their job."),
    ("When is my next dentist appointment?", "The user sees the dental surgeon on Tuesday at 9 am."),
    ("What pet did I have as a child?", "Growing up, the user kept a hamster."),
    ("Where was I born?", "The user is originally from a village near Kraków."),
    ("How tall am I?", "The user measures 1.82 metres."),
    ("What sport do I play on weekends?", "Every Saturday the user plays tennis with friends."),
    ("What is my blood type?", "The user's blood group is O negative."),
    ("Which phone do I have?", "The user carries an iPhone 15."),
    ("What did I cook for the party?", "The user made a large pot of lasagne for the gathering."),
    ("Am I vegetarian?", "The user stopped eating meat two years ago."),
)

_SUBJECTS = ("The user", "My manager", "Our team", "The landlord", "A colleague", "The doctor", "Luna")
_VERBS = ("moved", "booked", "cancelled", "mentioned", "finished", "postponed", "reviewed", "bought")
_OBJECTS = (
    "the quarterly report",
    "a flight to Lisbon",
    "the dentist appointment",
    "a new laptop",
    "the rental contract",
    "two concert tickets",
    "the migration plan",
    "a birthday present",
)
_TAILS = ("yesterday.", "on Friday.", "after lunch.", "for next week.", "without telling anyone.", "again.")


def corpus(count: int, seed: int) -> list[str]:
    """``count`` short, varied sentences (always the same for a seed)."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}"
        for _ in range(count)
    ]


async def measure_embedder(
    embedder: Embedder, sentences: list[str], repeats: int, single_calls: int
) -> dict[str, Any]:
    await embedder.embed(sentences[:8])  # warm up (caches, thread pool, lazy load)
    batch_times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await embedder.embed(sentences)
        batch_times.append(time.perf_counter() - start)
    single_ms = []
    for sentence in sentences[:single_calls]:
        start = time.perf_counter()
        await embedder.embed([sentence])
        single_ms.append((time.perf_counter() - start) * 1000)

    questions = await embedder.embed([q for q, _ in PARAPHRASE_PAIRS])
    facts = await embedder.embed([f for _, f in PARAPHRASE_PAIRS])
    similarity = questions @ facts.T
    pairs = len(PARAPHRASE_PAIRS)
    # A tie with another fact counts against the embedder (an all-zero row ties with everything).
    ranks = [int((np.delete(similarity[i], i) >= similarity[i, i]).sum()) for i in range(pairs)]
    off_diagonal = similarity[~np.eye(pairs, dtype=bool)]
    median_batch = statistics.median(batch_times)
    return {
        "name": embedder.name,
        "dimensions": embedder.dimensions,
        "batch_sentences": len(sentences),
        "sentences_per_s": len(sentences) / median_batch,
        "batch_median_s": median_batch,
        "single_p50_ms": percentile(single_ms, 50),
        "single_p95_ms": percentile(single_ms, 95),
        "single_mean_ms": statistics.fmean(single_ms),
        "paraphrase_pairs": pairs,
        "acc_at_1": sum(rank == 0 for rank in ranks) / pairs,
        "acc_at_3": sum(rank < 3 for rank in ranks) / pairs,
        "mean_cos_true_pairs": float(np.diag(similarity).mean()),
        "mean_cos_other_pairs": float(off_diagonal.mean()),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    sentences = corpus(args.sentences, args.seed)
    results: dict[str, Any] = {"threads": args.threads, "embedders": []}
    if minilm_available():
        minilm = MiniLMEmbedder(threads=args.threads)
        start = time.perf_counter()
        await minilm.aload()
        load_s = time.perf_counter() - start
        numbers = await measure_embedder(minilm, sentences, args.repeats, args.single)
        results["embedders"].append({"load_s": load_s, **numbers})
    else:
        results["minilm_missing"] = "install 'obsmem[embeddings]' to measure MiniLM"
    lexical = LexicalHashEmbedder()
    numbers = await measure_embedder(lexical, sentences, args.repeats, args.single)
    results["embedders"].append({"load_s": 0.0, **numbers})
    return results


def render(results: dict[str, Any]) -> None:
    console = Console() if sys.stdout.isatty() else Console(width=130)
    table = Table(title=f"Embedders (MiniLM with {results['threads']} onnxruntime threads)")
    for column in (
        "embedder",
        "dim",
        "load",
        "sentences/s (batch)",
        "1 sentence p50",
        "p95",
        "acc@1",
        "acc@3",
        "cos true pairs",
        "cos other pairs",
    ):
        table.add_column(column, justify="left" if column == "embedder" else "right")
    for row in results["embedders"]:
        table.add_row(
            row["name"],
            str(row["dimensions"]),
            f"{row['load_s'] * 1000:.0f} ms",
            f"{row['sentences_per_s']:,.0f}",
            f"{row['single_p50_ms']:.2f} ms",
            f"{row['single_p95_ms']:.2f} ms",
            f"{row['acc_at_1']:.2f}",
            f"{row['acc_at_3']:.2f}",
            f"{row['mean_cos_true_pairs']:.3f}",
            f"{row['mean_cos_other_pairs']:.3f}",
        )
    console.print(table)
    if "minilm_missing" in results:
        console.print(f"MiniLM not measured: {results['minilm_missing']}")
    pairs = results["embedders"][0]["paraphrase_pairs"]
    console.print(
        f"Paraphrase set: {pairs} question → fact pairs; acc@k = the right fact among the k nearest of {pairs}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads for MiniLM")
    parser.add_argument("--sentences", type=int, default=1000, help="sentences in the throughput batch")
    parser.add_argument("--single", type=int, default=100, help="single-sentence calls for latency")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs (median)")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    args = parser.parse_args()
    results = asyncio.run(measure(args))
    render(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
