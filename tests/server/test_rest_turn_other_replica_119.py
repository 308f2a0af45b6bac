"""A REST turn in use on one replica was ended by another that had served one step of it ten
minutes before (review of 77c1db6, helper-119).

77c1db6 made a replica's TTL for a turn count from the turn's last use *on that replica*, "as its
lease does". But the lease is renewed by whichever replica serves a step, and a replica that
resumed the turn once keeps it in its ``turns``: once its own last use was TURN_TTL_S ago, the
next request beginning a turn there ended the turn and released its lease, although the client
had gone on stepping it on the first replica a minute before. The client's next step got 404
'Turn … is not open'. A replica now ends a turn for its TTL only when the lease says so too.
Two replicas on one SQLite store sharing one (fake) clock; the replicas' monotonic TTL is moved
the same way (``OpenTurn.started``), as tests/server/test_rest_turn_leases_117.py does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from obsmem.clock import FakeClock
from obsmem.server import ServerSettings, Service
from obsmem.server.service import TURN_TTL_S
from tests.integrations.agent_model import small_memory_config
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer, Keys, FakeClock]]:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    clock = FakeClock()
    first = Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None,
                         clock=clock)
    keys = make_keys(first)
    second = Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None,
                          clock=clock)
    with live_server(first) as a, live_server(second) as b:
        yield a, b, keys, clock


def _pass(replicas: tuple[LiveServer, ...], clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    for live in replicas:
        for entry in live.service.turns.values():
            entry.started -= seconds


def _text(text: str, role: str = "assistant") -> dict[str, object]:
    return {"role": role, "parts": [{"type": "text", "text": text}]}


def test_a_turn_stepped_on_one_replica_is_not_ended_by_another(
    replicas: tuple[LiveServer, LiveServer, Keys, FakeClock],
) -> None:
    a, b, keys, clock = replicas
    with httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=120) as on_a, \
            httpx.Client(base_url=b.url, headers=auth(keys.alice), timeout=120) as on_b:  # fmt: skip
        assert on_a.post("/api/threads", json={"id": "loop"}).status_code == 201
        assert on_a.post("/api/threads", json={"id": "other"}).status_code == 201
        began = on_a.post("/api/threads/loop/turns", json={"messages": [_text("a long task", "user")]})
        assert began.status_code == 201, began.text
        turn_id = began.json()["turn_id"]
        # one step through the second replica (a load balancer), the rest through the first
        first_step = on_b.post(f"/api/turns/{turn_id}/step", json={"messages": [_text("step 0")]})
        assert first_step.status_code == 200, first_step.text
        for i in range(1, 4):
            _pass((a, b), clock, TURN_TTL_S / 2)
            stepped = on_a.post(f"/api/turns/{turn_id}/step", json={"messages": [_text(f"step {i}")]})
            assert stepped.status_code == 200, (i, stepped.text)
            # another user's request begins a turn on the second replica meanwhile
            other = on_b.post("/api/threads/other/turns", json={"messages": [_text(f"hello {i}", "user")]})
            assert other.status_code == 201, other.text
        last = on_a.post(f"/api/turns/{turn_id}/step", json={"messages": [_text("step 4")]})
        assert last.status_code == 200, last.text
