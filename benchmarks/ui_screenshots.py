"""Screenshots of the inspector's main pages (``obsmem serve`` → ``/ui``), for the README.

Starts a live server on loopback holding the first turns of the bundled demo conversation (the
offline observer, retrieval mode on, three knowledge candidates), signs in with a resource key
through the login form in the system Chromium (Playwright, headless) and saves one PNG per page:

    .venv/bin/python benchmarks/ui_screenshots.py                 # → docs/screenshots/*.png
    .venv/bin/python benchmarks/ui_screenshots.py --out /tmp/shots --turns 80

Needs ``pip install playwright`` and a Chromium at ``--chromium`` (default /usr/bin/chromium);
no browser is downloaded.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from obsmem import parse_groups

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.server.ui_env import CHROMIUM, DEMO_THREAD, open_ui_env, sign_in  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--turns", type=int, default=60, help="demo turns to load (at most 400)")
    parser.add_argument("--chromium", default=CHROMIUM)
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open_ui_env(Path(tmp), turns=min(400, args.turns)) as env:
        record = env.live.call(env.memory.get_record(DEMO_THREAD))
        group = parse_groups(record.active_observations)[-1]
        pages = {
            "threads": "/ui/threads",
            "timeline": f"/ui/threads/{DEMO_THREAD}",
            "group": f"/ui/threads/{DEMO_THREAD}/groups/{group.id}",
            "context": f"/ui/threads/{DEMO_THREAD}/context",
            "generations": f"/ui/threads/{DEMO_THREAD}/generations",
            "review": "/ui/knowledge/review",
            "audit": "/ui/knowledge/audit",
        }
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 680})
            sign_in(page, env.url, env.keys.alice)
            for name, path in pages.items():
                page.goto(env.url + path)
                target = args.out / f"{name}.png"
                page.screenshot(path=str(target))
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}  "
                      f"{target.stat().st_size // 1024} KiB")  # fmt: skip
            browser.close()


if __name__ == "__main__":
    main()
