"""Hostile review (helper-124): the timeline folds a long message away in a ``<details>``, but
still sent all of it: each part is cut at 2,000 characters, and a message of many parts (a tool
loop's results, or a client posting 500 text parts) was sent whole, 100 messages a page. The
timeline now sends at most 20,000 characters of a message and says how many more the API holds."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page

from tests.server.live import auth
from tests.server.ui_env import UiEnv, open_ui_env

PARTS = 300


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-msg124"), turns=1) as env:
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=120) as client:
            assert client.post("/api/threads", json={"id": "parts124", "resource_id": "alice"}).status_code == 201
            client.post("/api/threads/parts124/messages", json={"messages": [{
                "id": "many-parts", "role": "user",
                "parts": [{"type": "text", "text": f"part {n:03d} " + "z" * 1990} for n in range(PARTS)]}]},
            ).raise_for_status()  # fmt: skip
        yield env


def test_a_message_of_many_parts_is_sent_bounded(alice: Page, ui: UiEnv) -> None:
    alice.goto(ui.url + "/ui/threads/parts124")
    item = alice.locator('li.msg[data-id="many-parts"]')
    item.locator("details summary").click()
    shown = item.inner_text()
    assert "part 000" in shown and "part 005" in shown
    assert len(shown) <= 21_000, len(shown)
    assert "more characters" in shown and f"part {PARTS - 1:03d}" not in shown
