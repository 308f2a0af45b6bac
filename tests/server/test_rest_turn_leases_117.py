"""A REST turn is open while its lease ``rest-turn:<turn id>`` is (see
:mod:`obsmem.server.service`). A turn whose lease had expired when its client came back (a step
or end after the turn's TTL) was answered 404 and dropped, but its lease row stayed in the store
for ever, and the turn was never ended: a long-running server gained one row per such turn. The
404 now ends the turn and deletes its row, and rows no process releases (a replica killed while
holding turns) are purged by later acquisitions (tests/storage/test_lease_purge_117.py).

Separately, the turns a replica ended for their TTL were all ended inside the next request that
began or resumed one: with many expired, that one request ended each in turn. It now ends a
bounded number per request (:data:`obsmem.server.service.EXPIRE_PER_REQUEST`). And a turn's TTL
counted from its begin, not its last step: a turn still in use was ended."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from obsmem.clock import FakeClock
from obsmem.server import ServerSettings, Service
from obsmem.server.service import EXPIRE_PER_REQUEST, TURN_TTL_S
from obsmem.storage.contract import LEASE_PURGE_AFTER_S
from tests.integrations.agent_model import small_memory_config
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys

ROUNDS, PER_ROUND = 5, 12


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LiveServer, Keys, FakeClock]]:
    clock = FakeClock()
    service = Service.open(
        f"sqlite:///{tmp_path / 'memory.db'}", settings=ServerSettings(), config=small_memory_config(),
        max_turn_wait=None, clock=clock,
    )
    keys = make_keys(service)
    with live_server(service) as live:
        yield live, keys, clock


def _rows(live: LiveServer) -> int:
    return len(live.call(live.service.memory.store.list_leases("rest-turn:")))


def _begin(client: httpx.Client, thread: str, text: str) -> str:
    began = client.post(f"/api/threads/{thread}/turns", json={"messages": [
        {"role": "user", "parts": [{"type": "text", "text": text}]}]})
    assert began.status_code == 201, began.text
    turn_id: str = began.json()["turn_id"]
    return turn_id


def test_turns_stepped_after_their_lease_expired_leave_no_rows(
    served: tuple[LiveServer, Keys, FakeClock],
) -> None:
    live, keys, clock = served
    rows = []
    with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=120) as client:
        assert client.post("/api/threads", json={"id": "late"}).status_code == 201
        for round_ in range(ROUNDS):
            turns = [_begin(client, "late", f"question {round_}.{i}") for i in range(PER_ROUND)]
            clock.advance(TURN_TTL_S + 1)  # the client comes back after the turn's TTL
            for turn_id in turns:
                late = client.post(f"/api/turns/{turn_id}/step", json={"messages": [
                    {"role": "assistant", "parts": [{"type": "text", "text": "an answer"}]}]})
                assert late.status_code == 404, late.text
            rows.append(_rows(live))
        # each late turn was ended all the same: its input is there, once
        texts = [m["parts"][0]["text"] for m in client.get(
            "/api/threads/late/messages", params={"limit": 1000}).json()["messages"]]
        assert texts == [f"question {r}.{i}" for r in range(ROUNDS) for i in range(PER_ROUND)]
    assert rows == [0] * ROUNDS, rows


def test_rows_of_turns_no_process_ends_are_purged(served: tuple[LiveServer, Keys, FakeClock]) -> None:
    """Turns a replica held when it was killed: nobody ends them or releases their rows. Taking
    later turns' leases deletes them once they are long expired."""
    live, keys, clock = served
    rows = []
    with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=120) as client:
        assert client.post("/api/threads", json={"id": "killed"}).status_code == 201
        for round_ in range(ROUNDS):
            for i in range(PER_ROUND):
                _begin(client, "killed", f"question {round_}.{i}")
            live.service.turns.clear()  # the replica that held them is gone (its memory with it)
            clock.advance(TURN_TTL_S + LEASE_PURGE_AFTER_S + 1)
            rows.append(_rows(live))
        _begin(client, "killed", "one more")
    assert rows[-1] <= PER_ROUND and _rows(live) == 1, rows


def test_a_request_ends_a_bounded_number_of_expired_turns(served: tuple[LiveServer, Keys, FakeClock]) -> None:
    live, keys, clock = served
    with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=120) as client:
        assert client.post("/api/threads", json={"id": "many"}).status_code == 201
        for i in range(3 * EXPIRE_PER_REQUEST):
            _begin(client, "many", f"question {i}")
        for entry in live.service.turns.values():  # the replica's TTL has passed for each of them
            entry.started -= TURN_TTL_S + 1
        clock.advance(TURN_TTL_S + 1)  # and their leases' (a turn a replica still holds it ends)
        open_before = _rows(live)
        _begin(client, "many", "a new question")
        ended = open_before + 1 - _rows(live)
        assert ended == EXPIRE_PER_REQUEST, (open_before, ended)
        for i in range(2):
            _begin(client, "many", f"another {i}")
        assert _rows(live) == 3  # every expired turn ended, over three requests: the three new ones stay


def _shift(live: LiveServer, clock: FakeClock, seconds: float) -> None:
    """``seconds`` pass: for the leases (the memory's clock) and for the replica's turn TTL."""
    clock.advance(seconds)
    for entry in live.service.turns.values():
        entry.started -= seconds


def test_a_turn_in_use_is_not_ended_for_its_age(served: tuple[LiveServer, Keys, FakeClock]) -> None:
    """A turn stepped shortly before its TTL (a long tool loop) was ended all the same once the
    TTL had passed since it began: its lease, renewed by the step, said it was open, but the next
    request that began a turn ended it, and the client's next step was answered 404. The TTL now
    counts from the turn's last use, as its lease does."""
    live, keys, clock = served
    with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=120) as client:
        assert client.post("/api/threads", json={"id": "long-loop"}).status_code == 201
        assert client.post("/api/threads", json={"id": "other"}).status_code == 201
        turn_id = _begin(client, "long-loop", "Plan my trip, step by step.")
        _shift(live, clock, TURN_TTL_S - 10)
        step = {"messages": [{"role": "assistant", "parts": [{"type": "text", "text": "Step done."}]}]}
        assert client.post(f"/api/turns/{turn_id}/step", json=step).status_code == 200
        _shift(live, clock, 20)  # 20 s after that step, TTL + 10 s after the turn began
        _begin(client, "other", "Something else.")  # a request that ends expired turns
        again = client.post(f"/api/turns/{turn_id}/step", json=step)
        assert again.status_code == 200, again.text
