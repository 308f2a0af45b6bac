"""How fast the inspector's pages load with 10,000 messages in one thread.

Starts a live ``obsmem serve`` app on loopback (SQLite, the offline observer, retrieval mode on,
the demo's thresholds, so the thread is observed and reflected many times), replays the
bundled demo conversation through the Turn API until the thread holds ``--messages`` messages
(each replay with fresh ids, shifted two weeks later), then loads every page ``--runs`` times:

* server: the full HTTP response read by httpx (what the server spends, plus loopback);
* browser: navigation start to the end of the ``load`` event in headless Chromium, as the page's
  own Performance API reports it (parse, style and layout included); and Playwright's
  ``page.goto`` wall time beside it.

The median and the worst run are printed per page, against the target of 300 ms.

    .venv/bin/python benchmarks/ui_pages.py                       # 10k messages, about 2-3 minutes
    .venv/bin/python benchmarks/ui_pages.py --messages 2000 --runs 3

Needs ``pip install playwright`` and a Chromium at ``--chromium`` (default /usr/bin/chromium).
"""

from __future__ import annotations

import argparse
import re
import logging
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig, parse_groups

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from obsmem.demo.conversation import demo_conversation  # noqa: E402
from tests.server.ui_env import CHROMIUM, UiEnv, open_ui_env, sign_in  # noqa: E402

THREAD = "long-thread"
TARGET_MS = 300.0
#: The browser's own navigation timing: from the request's start to the end of the load event.
NAVIGATION_MS = "performance.getEntriesByType('navigation')[0].loadEventEnd"
#: The demo's own thresholds (``obsmem demo``): an observation every ~2k message tokens, a
#: reflection past 3k observation tokens; retrieval on, so observation groups are kept.
CONFIG = MemoryConfig(
    retrieval=True, observation=ObservationConfig(message_tokens=2_000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=3_000),
)


async def replay_slice(memory: Memory, copy: int, start: int, stop: int) -> int:
    """Replay turns ``start:stop`` of the demo into THREAD as copy ``copy`` (fresh ids, shifted two
    weeks per copy); the number of messages the thread holds after it."""
    shift = timedelta(days=14 * copy)

    def fresh(message: Message) -> Message:
        return message.model_copy(update={
            "id": f"{message.id}-r{copy}", "thread_id": None, "resource_id": None,
            "created_at": message.created_at + shift,
        })  # fmt: skip

    for demo_turn in demo_conversation()[start:stop]:
        turn = await memory.begin_turn(thread_id=THREAD, messages=[fresh(demo_turn.user)])
        steps: list[list[Message]] = []
        for message in map(fresh, demo_turn.responses):
            if message.role == "tool" and steps:
                steps[-1].append(message)
            else:
                steps.append([message])
        for step in steps:
            await turn.step(step)
        await turn.end()
    await memory.settled()
    return await memory.store.count_messages(THREAD)


def fill(env: UiEnv, messages: int) -> int:
    """Replay the demo into THREAD, 50 turns per call, until it holds ``messages`` messages."""
    env.live.call(env.memory.create_thread(THREAD, "alice", title="10k messages", org_id="acme"))
    count, copy, total = 0, 0, len(demo_conversation())
    while count < messages:
        for start in range(0, total, 50):
            count = env.live.call(replay_slice(env.memory, copy, start, min(total, start + 50)))
            if count >= messages:
                break
        copy += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chromium", default=CHROMIUM)
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    messages = max(100, min(50_000, args.messages))
    runs = max(1, min(50, args.runs))
    with tempfile.TemporaryDirectory() as tmp, open_ui_env(Path(tmp), turns=10, config=CONFIG) as env:
        started = time.perf_counter()
        count = fill(env, messages)
        loaded_s = time.perf_counter() - started
        record = env.live.call(env.memory.get_record(THREAD))
        groups = parse_groups(record.active_observations)
        generations = len(env.live.call(env.memory.list_generations(THREAD, limit=1000)))
        middle = count // 2
        recent = env.live.call(env.memory.store.list_messages(THREAD, limit=50, newest_first=True))
        replied = next((m.id for m in recent if m.role == "assistant" and "obsmem_receipt" in m.metadata), None)
        with httpx.Client(base_url=env.url, cookies={"obsmem_ui_key": env.keys.alice}, timeout=60) as client:
            listing = client.get("/ui/knowledge").text
        nodes = re.findall(r'href="(/ui/knowledge/nodes/[^"?]+)', listing)
        pages = {
            "threads": "/ui/threads",
            "timeline (first page)": f"/ui/threads/{THREAD}",
            "timeline (middle page)": f"/ui/threads/{THREAD}?after_seq={middle}",
            "observation group": f"/ui/threads/{THREAD}/groups/{groups[-1].id}" if groups else "",
            "context preview": f"/ui/threads/{THREAD}/context",
            "generations + diff": f"/ui/threads/{THREAD}/generations",
            "usage (with the ledger chart)": "/ui/usage",
            "reply's receipt": f"/ui/messages/{replied}/receipt" if replied else "",
            "knowledge node + graph": nodes[0] if nodes else "",
            "review queue": "/ui/knowledge/review",
            "audit log": "/ui/knowledge/audit",
        }
        server: dict[str, list[float]] = {}
        browser_ms: dict[str, list[float]] = {}
        wall_ms: dict[str, list[float]] = {}
        with httpx.Client(base_url=env.url, cookies={"obsmem_ui_key": env.keys.alice}, timeout=60) as client:
            for name, path in pages.items():
                if not path:
                    continue
                print(f"timing {name}: {path}", file=sys.stderr, flush=True)
                client.get(path).raise_for_status()  # warm-up
                times = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append((time.perf_counter() - t0) * 1000)
                server[name] = times
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = browser.new_page()
            sign_in(page, env.url, env.keys.alice)
            for name, path in pages.items():
                if not path:
                    continue
                page.goto(env.url + path)
                times, walls = [], []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    page.goto(env.url + path, wait_until="load")
                    walls.append((time.perf_counter() - t0) * 1000)
                    times.append(float(page.evaluate(NAVIGATION_MS)))
                browser_ms[name] = times
                wall_ms[name] = walls
            browser.close()
    print(f"\nthread: {count} messages, {len(groups)} active observation groups, {generations} generations "
          f"(loaded in {loaded_s:.0f} s); {runs} runs per page after one warm-up; target {TARGET_MS:.0f} ms\n")  # fmt: skip
    header = (f"{'page':<24} {'server p50':>11} {'server max':>11} {'browser p50':>12} {'browser max':>12} "
              f"{'goto p50':>10}  target")  # fmt: skip
    print(header)
    print("-" * len(header))
    for name in server:
        s, b, w = server[name], browser_ms[name], wall_ms[name]
        ok = "ok" if max(statistics.median(s), statistics.median(b)) < TARGET_MS else "OVER"
        print(f"{name:<24} {statistics.median(s):>9.1f}ms {max(s):>9.1f}ms {statistics.median(b):>10.1f}ms "
              f"{max(b):>10.1f}ms {statistics.median(w):>8.1f}ms  {ok}")  # fmt: skip
    print("\nserver: the whole response read by httpx; browser: navigation start to the end of the load event "
          "(Performance API); goto: Playwright's page.goto wall time, its own round trips included.")


if __name__ == "__main__":
    main()
