"""Helpers the inspector's browser tests share (the fixtures are in this folder's conftest)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from obsmem.server.keys import parse_secret
from tests.server.ui_env import UiEnv

__all__ = ["UNLABELLED", "focus", "key_id", "run"]

#: Every visible form control without a label, an aria-label or (a button) its own text.
UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter(e => e.type !== 'hidden')
  .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !(e.tagName === 'BUTTON' && e.textContent.trim()))
  .map(e => e.outerHTML)"""


def run(ui: UiEnv, coroutine: Any) -> Any:
    """``coroutine``'s result, run on the live server's event loop."""
    return ui.live.call(coroutine)


def key_id(secret: str) -> str:
    parsed = parse_secret(secret)
    assert parsed is not None
    return parsed[0]


def focus(page: Page, selector: str) -> None:
    """Tab through the page until ``selector`` has the focus (the keyboard path a user takes)."""
    for _ in range(300):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement === document.querySelector({selector!r})"):
            return
    raise AssertionError(f"{selector} is not reachable with Tab")
