"""Shared setup of the inspector's browser tests: one headless system Chromium (driven by
Playwright) a module, a fresh browser context a test, and a page signed in as alice.

Each test module defines its own module-scoped ``ui`` fixture (the live server and what it
holds: :func:`tests.server.ui_env.open_ui_env`); the fixtures here use that one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.server.ui_env import CHROMIUM, UiEnv, sign_in


@pytest.fixture(scope="module")
def browser(ui: UiEnv) -> Iterator[Browser]:
    # after ``ui``: the server is set up with asyncio.run, which Playwright's loop would block
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    made = browser.new_context()
    yield made
    made.close()


@pytest.fixture
def alice(context: BrowserContext, ui: UiEnv) -> Page:
    page = context.new_page()
    sign_in(page, ui.url, ui.keys.alice)
    return page
