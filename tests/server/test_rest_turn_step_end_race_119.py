"""A step and an end of the same REST turn at once (a client retrying a step it timed out on
while it ends the turn, or two workers of one agent): the step that had found the turn open got
a 500 (KeyError from ``Service.held``, review of 77c1db6, helper-119).

``held`` checks the turn's lease, then renews it; 77c1db6 then moves the turn to the end of the
replica's turns with ``self.turns.pop(turn_id)``. The end, answered while the step's renewal was
on its way, had removed the turn from ``turns`` already, so the pop raised KeyError: an Internal
Server Error instead of the 404 'Turn … is not open' any other request for an ended turn gets.
The store's renewal is held until the end is answered, so the two always meet there."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from obsmem.clock import FakeClock
from obsmem.server import ServerSettings, Service
from tests.integrations.agent_model import small_memory_config
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LiveServer, Keys]]:
    service = Service.open(
        f"sqlite:///{tmp_path / 'memory.db'}", settings=ServerSettings(), config=small_memory_config(),
        max_turn_wait=None, clock=FakeClock(),
    )
    keys = make_keys(service)
    with live_server(service) as live:
        yield live, keys


def test_a_step_meeting_the_end_of_its_turn_is_answered_404(served: tuple[LiveServer, Keys]) -> None:
    live, keys = served
    store = live.service.memory.store
    renew = store.renew_lease
    in_renewal, ended = threading.Event(), threading.Event()
    hold_next = {"key": ""}

    async def held_renewal(key: str, owner: str, **options: Any) -> Any:
        if key == hold_next["key"]:
            hold_next["key"] = ""  # the step's renewal only: the end's goes through
            in_renewal.set()
            for _ in range(6000):  # until the end is answered (bounded: never a hang)
                if ended.is_set():
                    break
                await asyncio.sleep(0.01)
        return await renew(key, owner, **options)

    store.renew_lease = held_renewal  # type: ignore[method-assign]
    with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=120) as client:
        assert client.post("/api/threads", json={"id": "race"}).status_code == 201
        began = client.post("/api/threads/race/turns", json={"messages": [
            {"role": "user", "parts": [{"type": "text", "text": "what is the weather?"}]}]})
        assert began.status_code == 201, began.text
        turn_id = began.json()["turn_id"]
        answer = {"role": "assistant", "parts": [{"type": "text", "text": "sunny"}]}
        stepped: dict[str, httpx.Response] = {}

        def step() -> None:
            with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=120) as other:
                stepped["response"] = other.post(f"/api/turns/{turn_id}/step", json={"messages": [answer]})

        hold_next["key"] = f"rest-turn:{turn_id}"
        stepper = threading.Thread(target=step)
        stepper.start()
        assert in_renewal.wait(60)  # the step found the turn open and is renewing its lease
        end = client.post(f"/api/turns/{turn_id}/end", json={"messages": []})
        ended.set()
        stepper.join(120)
        assert end.status_code == 200, end.text
        late = stepped["response"]
        assert late.status_code == 404, (late.status_code, late.text)
        assert "not open" in late.text or "Turn" in late.text
