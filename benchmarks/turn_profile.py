"""Turn profile: where the time of a steady-state turn goes.

SQLite in a temporary folder, no model calls (``--message-tokens`` is set high, 30,000 by
default, so nothing is observed and every stored message stays in the raw tail). Warm-up turns
first give each of a few threads a tail of ``--tail`` messages (40 by default, about what
``critical_path.py``'s 3,000-token threshold keeps; 600 shows the cost of a long tail); then
``--turns`` turns, spread over those threads so that no tail grows by more than a tenth, are
timed and profiled with ``cProfile``. A turn is what ``benchmarks/critical_path.py`` measures:
``begin_turn`` with one short user message, ``step`` with one short reply, ``end``.

Printed: the turn's p50/p90 time (every other turn runs without the profiler, to give its plain
time, the part of it spent awaiting store calls, and the ratio to a raw SQLite persist-and-read
measured beside it, as in ``critical_path.py``), its store calls per turn (by method), and the functions where
the time goes (own time per turn, calls per turn, cumulative time per turn), heaviest first;
``--json PATH`` writes the same numbers. ``--mode`` picks the turn shape: ``step`` (begin, step
with the reply, end: the critical path's), ``end`` (begin, end with the reply) or ``tools`` (an
agent's tool loop: begin, then ``TOOL_CALLS`` calls, each a step with the call and a step with
its result, dict arguments and dict results as real tools have, then end with the reply). The
raw SQLite floor stays one commit of two messages a turn; ``per_boundary_p50`` (the turn's p50
over its boundaries: begin and each step) is the number to compare across modes.

Measure before and after a change, on the same machine and load: the absolute milliseconds
move with the machine, the calls per turn do not.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import inspect
import json
import pstats
import sqlite3
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig

RESOURCE_ID = "profile-user"


def _user(i: int) -> str:
    return f"user says something number {i} about the shipment to Lisbon and the invoice {i * 7}"


def _reply(i: int) -> str:
    return f"assistant answers {i}: noted, the invoice {i * 7} is filed."


class CallCounter:
    """Counts and times the store calls of one ``Memory`` by method (wrapped on the instance)."""

    def __init__(self, store: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.by_method: dict[str, float] = defaultdict(float)
        self.seconds = 0.0
        for name in dir(type(store)):
            if not name.startswith("_") and inspect.iscoroutinefunction(getattr(type(store), name)):
                setattr(store, name, self._wrap(name, getattr(store, name)))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)  # transparent: the store's combined writes still stand in for it
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                self.seconds += took
                self.by_method[name] += took

        return counted


class RawReference:
    """``critical_path.py``'s floor, here too: insert a turn's two messages into a plain ``sqlite3``
    table in WAL mode (one transaction) and read the last 20 back."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(
            "CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, thread_id TEXT NOT NULL, "
            "role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL)"
        )
        self.conn.execute("CREATE INDEX messages_thread ON messages (thread_id, seq)")

    def persist_and_read(self, i: int) -> float:
        start = time.perf_counter()
        now = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.conn.execute("BEGIN")
        self.conn.execute(
            "INSERT INTO messages (thread_id, role, content, created_at) VALUES (?, ?, ?, ?), (?, ?, ?, ?)",
            ("t", "user", _user(i), now, "t", "assistant", _reply(i), now),
        )
        self.conn.execute("COMMIT")
        rows = self.conn.execute(
            "SELECT seq, role, content, created_at FROM messages WHERE thread_id = ? ORDER BY seq DESC LIMIT 20",
            ("t",),
        ).fetchall()
        assert rows
        return time.perf_counter() - start


TOOL_CALLS = 3  # per turn in ``--mode tools``


def _tool_call(i: int, k: int) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(
        tool_call_id=f"call-{i}-{k}", tool_name="search_shipments",
        args={"query": f"shipment {i} to Lisbon", "page": k, "filters": {"status": ["open", "late"], "max": 5}},
    ),))


def _tool_result(i: int, k: int) -> Message:
    rows = [{"id": f"S-{i}-{n}", "city": "Lisbon", "invoice": i * 7 + n, "late": n % 2 == 0} for n in range(5)]
    return Message(role="tool", parts=(ToolResultPart(
        tool_call_id=f"call-{i}-{k}", tool_name="search_shipments", result={"rows": rows, "total": 5},
    ),))


#: Messages a turn stores and boundaries it crosses (``begin_turn`` and each ``step``), by mode.
MESSAGES_PER_TURN = {"step": 2, "end": 2, "tools": 2 + 2 * TOOL_CALLS}
BOUNDARIES_PER_TURN = {"step": 2, "end": 1, "tools": 1 + 2 * TOOL_CALLS}


async def _turn(memory: Memory, thread_id: str, i: int, mode: str) -> None:
    turn = await memory.begin_turn(thread_id=thread_id, resource_id=RESOURCE_ID, messages=[Message.user(_user(i))])
    if mode == "tools":
        for k in range(TOOL_CALLS):
            await turn.step([_tool_call(i, k)])
            await turn.step([_tool_result(i, k)])
        await turn.end([Message.assistant(_reply(i))])
    elif mode == "step":
        await turn.step([Message.assistant(_reply(i))])
        await turn.end()
    else:
        await turn.end([Message.assistant(_reply(i))])


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="obsmem-turn-profile-"))
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=args.message_tokens),
        reflection=ReflectionConfig(observation_tokens=max(40_000, args.message_tokens)),
    )
    memory = Memory(f"sqlite:///{folder / 'profile.db'}", config=config)
    warm = max(1, args.tail // MESSAGES_PER_TURN[args.mode])
    per_thread = max(1, args.tail // 20)  # profiled turns per thread: its tail grows by a tenth at most
    threads = [f"profile-thread-{n}" for n in range(-(-args.turns // per_thread))]
    try:
        for thread_id in threads:
            await memory.create_thread(thread_id, resource_id=RESOURCE_ID)
            for i in range(warm):
                await _turn(memory, thread_id, i, args.mode)
        counter = CallCounter(memory.store)
        raw = RawReference(folder / "raw.db")
        profiler = cProfile.Profile()
        times: list[float] = []
        plain: list[float] = []
        store: list[float] = []
        raw_times: list[float] = []
        for i in range(args.turns):
            # Each thread gets two turns in a row: the first is timed plainly (with the store
            # time inside it and the raw floor beside it), the second under the profiler.
            thread_id = threads[i // per_thread]
            profiled = i % 2 == 1
            if profiled:
                profiler.enable()
            before = counter.seconds
            start = time.perf_counter()
            await _turn(memory, thread_id, warm + i, args.mode)
            took = time.perf_counter() - start
            if profiled:
                profiler.disable()
                times.append(took)
            else:
                plain.append(took)
                store.append(counter.seconds - before)
                raw_times.append(raw.persist_and_read(i))
        tails = [len(await memory.list_messages(t)) for t in threads]
    finally:
        await memory.aclose()
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.split("/src/")[-1] if "/src/" in filename else filename.rsplit("/", 1)[-1]
        rows.append(
            {
                "function": f"{where}:{line}({name})",
                "calls_per_turn": ncalls / len(times),
                "own_ms_per_turn": tottime * 1000 / len(times),
                "cum_ms_per_turn": cumtime * 1000 / len(times),
            }
        )
    rows.sort(key=lambda r: r["own_ms_per_turn"], reverse=True)
    obsmem_rows = [r for r in rows if r["function"].startswith("obsmem/")]
    obsmem_rows.sort(key=lambda r: r["cum_ms_per_turn"], reverse=True)
    ordered = sorted(times)
    p50 = statistics.median(plain)
    raw_p50 = statistics.median(raw_times)
    return {
        "plain_ms": {
            "turn_p50": p50 * 1000,
            "turn_p99": _p99(plain) * 1000,
            "store_calls_p50": statistics.median(store) * 1000,
            "outside_store_p50": statistics.median([a - b for a, b in zip(plain, store, strict=True)]) * 1000,
            "raw_sqlite_p50": raw_p50 * 1000,
            "raw_sqlite_p99": _p99(raw_times) * 1000,
            "ratio_p50": p50 / raw_p50,
            "ratio_p99": _p99(plain) / _p99(raw_times),
            "per_boundary_p50": p50 * 1000 / BOUNDARIES_PER_TURN[args.mode],
        },
        "settings": {
            "turns": args.turns, "tail": args.tail, "threads": len(threads), "message_tokens": args.message_tokens,
            "mode": args.mode, "stored_messages": [min(tails), max(tails)],
        },
        "turn_ms": {
            "p50": statistics.median(times) * 1000,
            "p90": ordered[int(0.9 * (len(ordered) - 1))] * 1000,
            "mean": statistics.fmean(times) * 1000,
        },
        "store_calls_per_turn": {k: v / len(plain + times) for k, v in sorted(counter.calls.items())},
        "store_ms_per_call": {k: counter.by_method[k] * 1000 / v for k, v in sorted(counter.calls.items())},
        "own_time": rows[: args.top],
        "obsmem_cumulative": obsmem_rows[: args.top],
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def render(result: dict[str, Any]) -> None:
    console = Console(width=max(140, Console().width))
    s, t = result["settings"], result["turn_ms"]
    console.print(
        f"[bold]Turn profile[/]: {s['turns']} turns ({s['mode']}) over {s['threads']} thread(s), raw tails of "
        f"{s['stored_messages'][0]}–{s['stored_messages'][1]} messages at the end, "
        f"message_tokens {s['message_tokens']}. "
        f"Per turn (under cProfile): p50 {t['p50']:.2f} ms, p90 {t['p90']:.2f} ms, mean {t['mean']:.2f} ms"
    )
    p = result["plain_ms"]
    console.print(
        f"Without the profiler (the other half of the turns): p50 {p['turn_p50']:.2f} ms (store calls "
        f"{p['store_calls_p50']:.2f} ms, the rest {p['outside_store_p50']:.2f} ms), p99 {p['turn_p99']:.2f} ms; "
        f"raw SQLite persist-and-read p50 {p['raw_sqlite_p50']:.2f} ms, p99 {p['raw_sqlite_p99']:.2f} ms: "
        f"[bold]{p['ratio_p50']:.1f}× p50, {p['ratio_p99']:.1f}× p99[/]; "
        f"per boundary (begin and each step) p50 {p['per_boundary_p50']:.2f} ms"
    )
    calls = result["store_calls_per_turn"]
    console.print(
        f"Store calls per turn: {sum(calls.values()):.1f} ("
        + ", ".join(f"{k} {v:g} × {result['store_ms_per_call'][k]:.2f} ms" for k, v in calls.items())
        + "; the profiled turns' calls included)"
    )
    for key, title, sort in (
        ("own_time", "Own time per turn (all functions)", "own"),
        ("obsmem_cumulative", "Cumulative time per turn (obsmem's functions)", "cum"),
    ):
        table = Table(title=title)
        table.add_column("function")
        table.add_column("calls/turn", justify="right")
        table.add_column("own ms/turn", justify="right", style="bold" if sort == "own" else None)
        table.add_column("cum ms/turn", justify="right", style="bold" if sort == "cum" else None)
        for row in result[key]:
            table.add_row(
                row["function"], f"{row['calls_per_turn']:.1f}", f"{row['own_ms_per_turn']:.3f}",
                f"{row['cum_ms_per_turn']:.3f}",
            )
        console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=400, help="turns, half of them profiled (default 400)")
    parser.add_argument("--tail", type=int, default=40, help="raw tail in messages before profiling (default 40)")
    parser.add_argument("--message-tokens", type=int, default=30_000, help="observation threshold (default 30000)")
    parser.add_argument("--mode", choices=("step", "end", "tools"), default="step", help="turn shape (default step)")
    parser.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    render(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
