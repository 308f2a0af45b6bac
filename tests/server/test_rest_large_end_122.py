"""A large answer given to a REST turn's end (``POST /api/turns/{id}/end``) is counted on the
server's event loop (helper-122; the gateway's own path is fixed in
tests/server/test_gateway_large_answer_122.py by warming the answer before ``turn.end``).

``Turn.end`` saves its responses without counting their long texts in a thread first (as
``begin_turn`` and ``step`` do for their input, ``TokenCounter.warm``): the quiet-step check right
after the save counts a megabyte of answer on the loop (tens of milliseconds a megabyte), where
every other request of the server waits. The fix is outside the gateway (``src/obsmem/turn.py``,
``Turn.end``: ``await self._engine.core.counter.warm(parsed)`` before ``self._save``); it was a
strict xfail until that landed, and fails with it reverted.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.live import auth
from tests.server.test_gateway_large_answer_122 import BODY, Gateway, WatchedCounter, _loop_thread, _open, _settle


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, WatchedCounter]]:
    yield from _open(tmp_path_factory.mktemp("rest-large-end"), "openai")


def test_a_large_answer_ended_over_rest_is_counted_off_the_loop(served: tuple[Gateway, WatchedCounter]) -> None:
    gateway, counter = served
    loop = _loop_thread(gateway)
    with httpx.Client(base_url=gateway.live.url, headers=auth(gateway.keys.alice), timeout=300) as client:
        assert client.post("/api/threads", json={"id": "rest-large"}).status_code == 201
        begun = client.post("/api/threads/rest-large/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "Report?"}]})  # fmt: skip
        assert begun.status_code == 201, begun.text
        counter.threads.clear()
        ended = client.post(f"/api/turns/{begun.json()['turn_id']}/end", json={
            "format": "openai", "messages": [{"role": "assistant", "content": f"rest: {BODY}"}]})  # fmt: skip
        assert ended.status_code == 200, ended.text
    _settle(gateway)
    assert counter.threads, "the answer was never counted"
    on_loop = sum(1 for ident in counter.threads if ident == loop)
    assert on_loop == 0, f"{on_loop} of {len(counter.threads)} counts of a long text ran on the event loop"
