"""Resource scope and long threads at scale (issue 18): does a turn stay O(tail)?

Two measurements on the embedded SQLite store (a file in a temporary folder), offline roles:

1. **Context build vs thread length.** A thread holding N stored messages, all but the last
   ``--tail`` observed (the record's cursor sits there, with ~3,000 tokens of observations), so
   the context is the same size whatever N is. ``get_context`` and a non-waiting turn
   (``begin_turn`` + ``end`` with one short message each; the window stays far below the
   threshold) are timed at N = 1,000 and N = ``--long`` (100,000 by default). Target: the long
   thread's median ≤ 1.5× the short one's.
2. **Threads of one resource.** Resource scope (``scope="resource"``): one thread
   alone, then ``--threads`` (50) threads of one resource, each with the same history, turns
   taken round robin. Target: the median turn time with 50 threads ≤ 2× one thread's. Every turn
   is timed; turns that waited for memory work are reported apart and left out of the medians
   (they measure the observer, not the turn).

3. With ``--shared``, the same threads with ``share_threads_in_resource=True`` (informational, no
   target): every boundary reads the other threads' unobserved messages (their block counts
   toward the threshold) and every context shows them.

Prints a table with PASS/FAIL, or JSON with ``--json``. Timing is wall clock on this machine;
quote medians and ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from obsmem import Memory, MemoryConfig, Message
from obsmem.storage import open_store
from obsmem.storage.contract import ObservationRecord, ThreadState, lineage_key

_OBSERVATIONS = "\n".join(
    f"Date: Dec {day}, 2026\n* 🔴 (09:{day:02d}) User works on the harbour invoice batch {day}; budget {day * 100} EUR."
    for day in range(1, 29)
) * 3


def _history(thread_id: str, n: int) -> list[Message]:
    return [
        (Message.user if i % 2 == 0 else Message.assistant)(
            f"{thread_id} message {i}: the shipment {i} for the north warehouse is due on day {i % 28 + 1}."
        )
        for i in range(n)
    ]


async def _seed(memory: Memory, thread_id: str, resource_id: str, n: int, tail: int, scope: str) -> None:
    """Store ``n`` messages in ``thread_id`` and a record whose cursor leaves the last ``tail`` unobserved."""
    await memory.create_thread(thread_id, resource_id=resource_id)
    store = memory.store
    batch = 2000
    last_seq = 0
    history = _history(thread_id, n)
    for start in range(0, n, batch):
        saved = await store.save_messages(thread_id, history[start : start + batch])
        last_seq = saved[-1].seq or last_seq
    cursor = max(0, last_seq - tail)
    lineage = lineage_key("resource" if scope == "resource" else "thread", thread_id, resource_id)
    head = await store.get_head(lineage)
    threads = {thread_id: ThreadState(cursor=cursor)}
    if head is None:
        record = ObservationRecord(
            id=f"omr_scale_{resource_id}_{thread_id}" if scope == "thread" else f"omr_scale_{resource_id}",
            lineage=lineage,
            scope="resource" if scope == "resource" else "thread",
            thread_id=None if scope == "resource" else thread_id,
            resource_id=resource_id,
            active_observations=_OBSERVATIONS,
            observation_tokens=memory.counter.count_text(_OBSERVATIONS),
            threads=threads,
        )
        result = await store.create_record(record)
    else:
        record = head.model_copy(update={"threads": {**head.threads, **threads}, "version": head.version})
        result = await store.update_record(record, expected_version=head.version)
    if not result.applied:
        raise RuntimeError(f"seeding the record of {thread_id} failed")


def _config(scope: str, shared: bool = False) -> MemoryConfig:
    config: dict[str, Any] = {
        "scope": scope, "observation": {"message_tokens": 30_000}, "reflection": {"observation_tokens": 40_000}
    }
    if shared:
        config["share_threads_in_resource"] = True
    return MemoryConfig.model_validate(config)


async def _time_thread(memory: Memory, thread_id: str, repeats: int) -> dict[str, list[float]]:
    context_s: list[float] = []
    turn_s: list[float] = []
    waited = 0
    for i in range(repeats):
        started = time.perf_counter()
        await memory.get_context(thread_id)
        context_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        turn = await memory.begin_turn(thread_id=thread_id, messages=[Message.user(f"quick question {i}?")])
        await turn.end([Message.assistant(f"answer {i}.")])
        elapsed = time.perf_counter() - started
        if turn.waited:
            waited += 1
        else:
            turn_s.append(elapsed)
    return {"context_s": context_s, "turn_s": turn_s, "waited": [float(waited)]}


async def thread_length(long_n: int, tail: int, repeats: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for n in (1_000, long_n):
        with tempfile.TemporaryDirectory() as folder:
            store = open_store(f"sqlite:///{Path(folder) / 'scale.db'}")
            async with Memory(store, config=_config("thread")) as memory:
                seeded = time.perf_counter()
                await _seed(memory, "t", "r", n, tail, "thread")
                seed_s = time.perf_counter() - seeded
                await _time_thread(memory, "t", 3)  # warm caches
                timed = await _time_thread(memory, "t", repeats)
        rows[str(n)] = {
            "messages": n,
            "seed_s": round(seed_s, 2),
            "context_p50_ms": round(statistics.median(timed["context_s"]) * 1000, 3),
            "turn_p50_ms": round(statistics.median(timed["turn_s"]) * 1000, 3) if timed["turn_s"] else None,
            "turns_waited": int(timed["waited"][0]),
        }
    short, long = rows["1000"], rows[str(long_n)]
    context_ratio = long["context_p50_ms"] / short["context_p50_ms"]
    turn_ratio = (long["turn_p50_ms"] or 0) / (short["turn_p50_ms"] or 1)
    return {
        "rows": rows,
        "context_ratio": round(context_ratio, 3),
        "turn_ratio": round(turn_ratio, 3),
        "context_pass": context_ratio <= 1.5,
        "turn_pass": turn_ratio <= 1.5,
    }


async def resource_threads(threads: int, history: int, tail: int, rounds: int, shared: bool = False) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for count in (1, threads):
        with tempfile.TemporaryDirectory() as folder:
            store = open_store(f"sqlite:///{Path(folder) / 'scale.db'}")
            async with Memory(store, config=_config("resource", shared)) as memory:
                ids = [f"t{i}" for i in range(count)]
                for thread_id in ids:
                    await _seed(memory, thread_id, "r", history, tail, "resource")
                turn_s: list[float] = []
                waited = 0
                for round_ in range(rounds + 1):
                    for thread_id in ids if count > 1 else ids * min(threads, 10):
                        started = time.perf_counter()
                        turn = await memory.begin_turn(
                            thread_id=thread_id, messages=[Message.user(f"{thread_id} asks {round_}?")]
                        )
                        await turn.end([Message.assistant(f"reply {round_}.")])
                        elapsed = time.perf_counter() - started
                        if round_ == 0:
                            continue  # warm-up round
                        if turn.waited:
                            waited += 1
                        else:
                            turn_s.append(elapsed)
        rows[str(count)] = {
            "threads": count,
            "turns_timed": len(turn_s),
            "turns_waited": waited,
            "turn_p50_ms": round(statistics.median(turn_s) * 1000, 3),
            "turn_p99_ms": round(sorted(turn_s)[max(0, int(len(turn_s) * 0.99) - 1)] * 1000, 3),
        }
    ratio = rows[str(threads)]["turn_p50_ms"] / rows["1"]["turn_p50_ms"]
    return {"rows": rows, "turn_ratio": round(ratio, 3), "turn_pass": ratio <= 2.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--long", type=int, default=100_000, help="messages in the long thread (default 100,000)")
    parser.add_argument("--tail", type=int, default=20, help="unobserved messages at the end of each thread")
    parser.add_argument("--repeats", type=int, default=30, help="timed contexts and turns per thread length")
    parser.add_argument("--threads", type=int, default=50, help="threads of one resource (default 50)")
    parser.add_argument("--history", type=int, default=200, help="stored messages per thread of the resource")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds over the resource's threads")
    parser.add_argument("--quick", action="store_true", help="a smaller run (10,000 messages, 10 threads)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--shared", action="store_true",
        help="also time the resource's threads with share_threads_in_resource=True (informational: each "
        "context shows, and each boundary counts, the other threads' unobserved messages)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.long, args.threads, args.repeats = 10_000, 10, 15

    async def run() -> dict[str, Any]:
        result = {
            "thread_length": await thread_length(args.long, args.tail, args.repeats),
            "resource_threads": await resource_threads(args.threads, args.history, args.tail, args.rounds),
        }
        if args.shared:
            result["resource_threads_shared"] = await resource_threads(
                args.threads, args.history, args.tail, args.rounds, shared=True
            )
        return result

    result = asyncio.run(run())
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    length, resource = result["thread_length"], result["resource_threads"]
    print("Context build and turn time vs thread length (SQLite, offline roles, tail of", args.tail, "messages)")
    print(f"{'messages':>10} {'seed s':>8} {'context p50 ms':>15} {'turn p50 ms':>12} {'waited':>7}")
    for row in length["rows"].values():
        print(
            f"{row['messages']:>10,} {row['seed_s']:>8} {row['context_p50_ms']:>15} "
            f"{row['turn_p50_ms']!s:>12} {row['turns_waited']:>7}"
        )
    print(f"context ratio {length['context_ratio']} (≤ 1.5): {'PASS' if length['context_pass'] else 'FAIL'}")
    print(f"turn ratio    {length['turn_ratio']} (≤ 1.5): {'PASS' if length['turn_pass'] else 'FAIL'}")
    print()
    print("Turn time, threads of one resource (resource scope)")
    print(f"{'threads':>8} {'timed':>6} {'waited':>7} {'turn p50 ms':>12} {'turn p99 ms':>12}")
    for row in resource["rows"].values():
        print(
            f"{row['threads']:>8} {row['turns_timed']:>6} {row['turns_waited']:>7} "
            f"{row['turn_p50_ms']:>12} {row['turn_p99_ms']:>12}"
        )
    print(f"turn ratio {resource['turn_ratio']} (≤ 2.0): {'PASS' if resource['turn_pass'] else 'FAIL'}")
    shared = result.get("resource_threads_shared")
    if shared is not None:
        print()
        print("Turn time, threads of one resource, share_threads_in_resource=True (informational)")
        print(f"{'threads':>8} {'timed':>6} {'waited':>7} {'turn p50 ms':>12} {'turn p99 ms':>12}")
        for row in shared["rows"].values():
            print(
                f"{row['threads']:>8} {row['turns_timed']:>6} {row['turns_waited']:>7} "
                f"{row['turn_p50_ms']:>12} {row['turn_p99_ms']:>12}"
            )
        print(f"turn ratio {shared['turn_ratio']} (informational)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
