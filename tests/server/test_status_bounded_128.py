"""Bounded (helper-128), over HTTP: ``GET /api/threads/{id}/status`` and the inspector's
timeline (its status panel) read the thread's whole unobserved window, 10,000 rows for a thread
saved while memory did not run. Now at most ``WINDOW_READ`` (2,000) and one more; the answer says
``window_partial`` and the panel says "at least". Counted in message rows, never timed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from obsmem import Message
from obsmem.types import TextPart
from tests.rows_read import RowsRead
from tests.server.conftest import Env, open_env
from tests.server.live import auth

THREAD = "long-unobserved-128"
SAVED = 10_000
READ = 2_000  # obsmem.om.status.WINDOW_READ
TIMELINE_PAGE = 100  # the timeline's own page of messages (obsmem.server.ui.pages.TIMELINE_PAGE)
START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("status128")):
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
            assert client.post("/api/threads", json={"id": THREAD}).status_code == 201
        messages = [
            Message(id=f"u{i:05d}", role="user" if i % 2 == 0 else "assistant",
                    parts=(TextPart(text=f"Note {i}: station {i % 50} counted {i % 7} herons."),),
                    created_at=START + timedelta(seconds=i))
            for i in range(SAVED)
        ]  # fmt: skip
        env.live.call(env.live.service.memory.save_messages(THREAD, messages))  # memory does not observe
        yield env


def test_rest_status_reads_a_bounded_part_of_a_long_window(env: Env) -> None:
    with RowsRead(env.live.service.memory.store) as read:
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
            got = client.get(f"/api/threads/{THREAD}/status")
    assert got.status_code == 200, got.text
    assert read.rows <= READ + 1, read.rows  # was 10,000
    body = got.json()
    assert body["window_partial"] is True and body["unobserved_messages"] == READ


def test_the_timeline_panel_says_the_window_was_counted_in_part(env: Env) -> None:
    with RowsRead(env.live.service.memory.store) as read:
        with httpx.Client(base_url=env.url, cookies={"obsmem_ui_key": env.keys.alice}, timeout=60) as client:
            shown = client.get(f"/ui/threads/{THREAD}")
    assert shown.status_code == 200
    assert read.rows <= READ + 1 + TIMELINE_PAGE + 1, read.rows  # was 10,000 and the page
    assert 'data-partial="true"' in shown.text and f"at least {READ} unobserved messages" in shown.text
