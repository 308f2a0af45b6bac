"""Event loop beside memory work: the largest heartbeat gap while a 1 MB message is observed (issue 12).

A heartbeat coroutine sleeps 10 ms and records the time between its ticks, on the same event loop
as a ``Memory`` (in-memory store, synchronous observation, the offline observer) that takes one
turn whose user message is ``--chars`` characters of varied sentences; the turn is observed
before it ends. The table shows per run the longest gap, the 99th percentile gap, the ticks,
how the offline jobs ran (``in child``: a child interpreter; ``in thread``: a thread of this
process) and the turn's wall time. Target (issue 12, item 1): no gap over 100 ms.

Modes: ``child`` (the default offload: large jobs in a child interpreter), ``thread``
(``OBSMEM_OFFLINE_PROCESS=0``: every job in a thread, sharing the interpreter lock).
The tests (tests/integrity/test_event_loop.py) check the mechanism deterministically (no heavy
routine on the loop's thread); this script measures what it buys. Wall-clock gaps depend on the
machine's load: quote the load beside the numbers.

Usage::

    python benchmarks/event_loop.py                         # child mode, 3 runs, 1 MB
    python benchmarks/event_loop.py --mode child --mode thread --runs 5 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta

from obsmem import Memory, MemoryConfig, ObservationConfig
from obsmem.clock import FakeClock
from obsmem.om.offline import offload
from obsmem.tokens import TokenCounter
from obsmem.types import Message, TextPart

TARGET_MS = 100.0
START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)
SENTENCES = (
    "My daughter Mia starts school on Monday and I need to pack her lunch with no peanuts.",
    "The deploy failed again at 09:14 because the migration on table orders timed out.",
    "Can you check whether the Berlin office still uses the old VPN gateway?",
    "I moved to Munich in 2019 and I work as a data engineer at Helio since then.",
)


def big_message(chars: int) -> str:
    body = " ".join(SENTENCES) + "\n"
    return ("Here is everything from my notes:\n" + body * (chars // len(body) + 1))[:chars] + "\nWhat now?"


class Heartbeat:
    """Ticks every 10 ms and keeps every gap between two ticks."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.last = time.perf_counter()
        self._task: asyncio.Task[None] | None = None

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self.last)
        self.last = now

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self._tick()

    async def __aenter__(self) -> Heartbeat:
        self.last = time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._tick()  # the time since the last tick counts too (a loop blocked to the end never ticks)
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def one_run(chars: int) -> dict[str, float | int]:
    counter = TokenCounter()
    counter.count_text("warm the table up")  # the first count loads the o200k table
    config = MemoryConfig(observation=ObservationConfig(buffer_tokens=False))
    memory = Memory("memory://", config=config, counter=counter, clock=FakeClock(START))
    user = Message(id="u1", role="user", parts=(TextPart(text=big_message(chars)),), created_at=START)
    reply = Message(id="a1", role="assistant", parts=(TextPart(text="Let us go through it."),),
                    created_at=START + timedelta(seconds=1))
    before = offload.stats()
    async with memory:
        started = time.perf_counter()
        async with Heartbeat() as beat:
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[user])
            await turn.step([reply])
            await turn.end()
        turn_s = time.perf_counter() - started
        record = await memory.get_record("t1")
    after = offload.stats()
    if record is None or not record.active_observations:
        raise SystemExit("the message was not observed: the run measures nothing")
    gaps = sorted(beat.gaps)
    return {
        "max_gap_ms": round(gaps[-1] * 1000, 1),
        "p99_gap_ms": round(gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] * 1000, 1),
        "ticks": len(gaps),
        "in_child": after["in_child"] - before["in_child"],
        "in_thread": after["in_thread"] - before["in_thread"],
        "turn_s": round(turn_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=1_000_000, help="the user message's size")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", action="append", choices=["child", "thread"], help="repeatable; default child")
    parser.add_argument("--json", help="write every run to this file")
    args = parser.parse_args(argv)
    modes = args.mode or ["child"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"heartbeat every 10 ms beside a {args.chars:,}-character message; target: no gap over "
          f"{TARGET_MS:g} ms; load average at start {load:.1f} on {os.cpu_count()} CPUs")
    print(f"{'mode':<8}{'run':>4}{'max gap':>11}{'p99 gap':>11}{'ticks':>7}{'in child':>10}{'in thread':>11}"
          f"{'turn':>8}  verdict")
    rows: list[dict[str, object]] = []
    for mode in modes:
        previous = os.environ.get(offload.PROCESS_ENV)
        if mode == "thread":
            os.environ[offload.PROCESS_ENV] = "0"
        try:
            for run in range(1, args.runs + 1):
                result = asyncio.run(one_run(args.chars))
                ok = float(result["max_gap_ms"]) <= TARGET_MS
                rows.append({"mode": mode, "run": run, **result, "within_target": ok})
                print(f"{mode:<8}{run:>4}{result['max_gap_ms']:>8.1f} ms{result['p99_gap_ms']:>8.1f} ms"
                      f"{result['ticks']:>7}{result['in_child']:>10}{result['in_thread']:>11}"
                      f"{result['turn_s']:>7.2f}s  {'within' if ok else 'OVER'}", flush=True)
        finally:
            if previous is None:
                os.environ.pop(offload.PROCESS_ENV, None)
            else:
                os.environ[offload.PROCESS_ENV] = previous
    for mode in modes:
        worst = max(float(r["max_gap_ms"]) for r in rows if r["mode"] == mode)  # type: ignore[arg-type]
        print(f"{mode}: worst gap {worst:.1f} ms over {args.runs} runs (target {TARGET_MS:g} ms)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"chars": args.chars, "target_ms": TARGET_MS, "load_at_start": load, "runs": rows}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
