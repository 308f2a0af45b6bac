"""Screenshots of the inspector's main pages (``obsmem serve`` → ``/ui``), for the README.

Starts a live server on loopback holding the first turns of the bundled demo conversation (the
offline observer, retrieval mode and buffering on, knowledge candidates and a few wikilinked facts about Nadia),
signs in with a resource key through the login form in the system Chromium (Playwright, headless)
and saves one PNG per page. The usage page needs model calls, which the offline observer does not
make: it is shot on a second server whose observer is a scripted model reporting token usage.

    .venv/bin/python benchmarks/ui_screenshots.py                 # → docs/screenshots/*.png
    .venv/bin/python benchmarks/ui_screenshots.py --out /tmp/shots --turns 80
    .venv/bin/python benchmarks/ui_screenshots.py --pages graph usage

Needs ``pip install playwright`` and a Chromium at ``--chromium`` (default /usr/bin/chromium);
no browser is downloaded.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from obsmem import parse_groups
from obsmem.om.receipts import RECEIPT_KEY
from obsmem.knowledge import Knowledge
from obsmem.models import Usage
from obsmem.models.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integrations.agent_model import small_memory_config  # noqa: E402
from tests.server.ui_env import CHROMIUM, DEMO_THREAD, UiEnv, open_ui_env, sign_in  # noqa: E402

SCOPE = "org:acme/resource:alice"
PAGES = ("threads", "timeline", "receipt", "group", "context", "generations", "review", "audit", "graph", "usage")
FACTS = (  # (subject, text, attribute): the wikilinks make the graph on Nadia's page
    ("Nadia", "Nadia lives in [[Lisbon]]", "home"),
    ("Nadia", "Nadia works at [[Acme Robotics]]", "employer"),
    ("Nadia", "Nadia's sister is [[Mira]]", "sister"),
    ("Nadia", "Nadia is learning [[Portuguese]]", None),
    ("Lisbon", "[[Lisbon]] is the capital of [[Portugal]]", "country"),
    ("Mira", "[[Mira]] lives in [[Porto]]", "home"),
    ("Acme Robotics", "[[Acme Robotics]] builds [[warehouse robots]]", None),
)
OBSERVATIONS = "<observations>\nDate: Jun 15, 2025\n* 🔴 (09:01) User talked about their trip.\n</observations>"


async def add_facts(knowledge: Knowledge) -> str:
    """The wikilinked facts; the id of Nadia's node."""
    for subject, text, attribute in FACTS:
        node = await knowledge.node(subject, "entity", SCOPE)
        await knowledge.append(node.id, text, SCOPE, reason="screenshots", attribute=attribute)
    nadia = await knowledge.store.resolve_node("Nadia", SCOPE)
    assert nadia is not None
    return nadia.id


def shoot(env: UiEnv, shots: dict[str, str], out: Path, chromium: str) -> None:
    """Sign in and save one PNG per page (Playwright starts after the server: its loop would
    block the ``asyncio.run`` that sets the server up)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 680})
        sign_in(page, env.url, env.keys.alice)
        for name, path in shots.items():
            page.goto(env.url + path)
            target = out / f"{name}.png"
            page.screenshot(path=str(target))
            print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}  "
                  f"{target.stat().st_size // 1024} KiB")  # fmt: skip
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--turns", type=int, default=60, help="demo turns to load (at most 400)")
    parser.add_argument("--chromium", default=CHROMIUM)
    parser.add_argument("--pages", nargs="+", choices=PAGES, default=list(PAGES), help="which screenshots to make")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = set(args.pages)
    if wanted - {"usage"}:
        config = small_memory_config(retrieval=True, buffered=True)  # buffered: the status panel shows a chunk
        with tempfile.TemporaryDirectory() as tmp, open_ui_env(Path(tmp), turns=min(400, args.turns), config=config) as env:
            record = env.live.call(env.memory.get_record(DEMO_THREAD))
            messages = env.live.call(env.memory.list_messages(DEMO_THREAD))
            replies = [m for m in messages if m.role == "assistant" and isinstance(m.metadata.get(RECEIPT_KEY), dict)]
            reply = next((m for m in reversed(replies) if m.metadata[RECEIPT_KEY]["groups"]), replies[-1])
            group = parse_groups(record.active_observations)[-1]
            assert env.live.service.knowledge is not None
            nadia = env.live.call(add_facts(env.live.service.knowledge))
            shots = {
                "threads": "/ui/threads",
                "timeline": f"/ui/threads/{DEMO_THREAD}",
                "receipt": f"/ui/messages/{reply.id}/receipt",
                "group": f"/ui/threads/{DEMO_THREAD}/groups/{group.id}",
                "context": f"/ui/threads/{DEMO_THREAD}/context",
                "generations": f"/ui/threads/{DEMO_THREAD}/generations",
                "review": "/ui/knowledge/review",
                "audit": "/ui/knowledge/audit",
                "graph": f"/ui/knowledge/nodes/{nadia}#graph-heading",
            }
            shoot(env, {k: v for k, v in shots.items() if k in wanted}, args.out, args.chromium)
    if "usage" in wanted:
        observer: Any = ScriptedModel([OBSERVATIONS], repeat_last=True,
                                      usage_per_call=Usage(input_tokens=1800, output_tokens=90, cached_input_tokens=700))  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp, open_ui_env(Path(tmp), turns=30, observer=observer) as env:
            shoot(env, {"usage": "/ui/usage#calls-heading"}, args.out, args.chromium)


if __name__ == "__main__":
    main()
