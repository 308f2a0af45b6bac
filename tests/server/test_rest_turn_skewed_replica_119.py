"""A replica whose clock runs ahead ended a REST turn for every replica (review of 77396fa,
helper-119).

Two ``obsmem serve`` replicas on one store, the second's clock 60 s ahead of the first's (the
lease times are wall-clock times of whichever replica writes or reads them). A turn begun on the
first is stepped through the second 30 s before its TTL ends by the first's clock: the second
thinks it expired and answers 404, as before 77396fa. But 77396fa also deletes the lease row
there ("its row goes"), so the turn was then gone on the first replica too, whose clock says it
is open: the client's retry there got 404 (before: 200). The contract keeps expired rows for
LEASE_PURGE_AFTER_S exactly so that no clock disagreement between processes takes a lease its
holder still thinks is held; a replica that does not hold the turn now leaves its row to that
purge."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from obsmem.clock import FakeClock
from obsmem.server import ServerSettings, Service
from obsmem.server.service import TURN_TTL_S
from tests.integrations.agent_model import small_memory_config
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys

SKEW_S = 60.0


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer, Keys, FakeClock, FakeClock]]:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    behind = FakeClock()
    ahead = FakeClock(start=FakeClock.DEFAULT_START + timedelta(seconds=SKEW_S))
    first = Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None,
                         clock=behind)
    keys = make_keys(first)
    second = Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None,
                          clock=ahead)
    with live_server(first) as a, live_server(second) as b:
        yield a, b, keys, behind, ahead


def test_a_replica_ahead_does_not_end_a_turn_the_others_hold(
    replicas: tuple[LiveServer, LiveServer, Keys, FakeClock, FakeClock],
) -> None:
    a, b, keys, behind, ahead = replicas
    answer = {"role": "assistant", "parts": [{"type": "text", "text": "an answer"}]}
    with httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=120) as on_a, \
            httpx.Client(base_url=b.url, headers=auth(keys.alice), timeout=120) as on_b:  # fmt: skip
        assert on_a.post("/api/threads", json={"id": "skew"}).status_code == 201
        began = on_a.post("/api/threads/skew/turns", json={"messages": [
            {"role": "user", "parts": [{"type": "text", "text": "a long tool loop"}]}]})
        assert began.status_code == 201, began.text
        turn_id = began.json()["turn_id"]
        for clock in (behind, ahead):
            # 30 s left by the first's clock, 30 s past by the second's
            clock.advance(TURN_TTL_S - SKEW_S / 2)
        assert on_b.post(f"/api/turns/{turn_id}/step", json={"messages": [answer]}).status_code == 404
        retried = on_a.post(f"/api/turns/{turn_id}/step", json={"messages": [answer]})
        assert retried.status_code == 200, retried.text
