"""A long unobserved window (the observer failing for hours on a busy thread) is read again at
every boundary, and must come from the caches, not be decoded and priced afresh each time: with
17,000 messages waiting, the store's decoded-row cache (16,384 messages) and the token counter's
parts index (12,500) were both smaller than the window, so every read evicted what the next one
needed (a cyclic scan defeats a least-recently-used cache) and each turn priced all 17,000
messages again, several times (120,000 pricings a turn at 20,000 messages: 2.2 s of the event
loop's CPU and 7.5 s of wall time a turn here, past ``max_turn_wait``'s 5 s). Counted by the
pricings, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.models.testing import FunctionModel
from obsmem.tokens import _PartCache

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAITING = 17_000


def _down(messages: list[Message], settings: Any) -> str:
    raise RuntimeError("provider down")


async def test_a_long_waiting_window_is_not_priced_again_each_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pricings: list[int] = []
    original = _PartCache.remember_parts

    def counted(self: _PartCache, *args: Any) -> None:
        pricings.append(1)
        original(self, *args)

    monkeypatch.setattr(_PartCache, "remember_parts", counted)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=3000))
    down = FunctionModel(_down)
    async with Memory(f"sqlite:///{tmp_path / 'o.db'}", observer=down, reflector=down, failure_policy="warn",
                      config=config) as memory:  # fmt: skip
        waiting = [
            Message.user(f"user says {i} about the shipment to Lisbon") if i % 2 == 0 else Message.assistant(f"noted {i}")
            for i in range(WAITING)
        ]
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=waiting[:1])
        await turn.end(waiting[1:2])
        await memory.store.save_messages("t", waiting[2:])
        per_turn = []
        for k in range(3):
            pricings.clear()
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(f"more {k}")])
            await turn.step([Message.assistant("ok")])
            await turn.end()
            await memory.settled()
            per_turn.append(len(pricings))
        assert down.calls > 0  # the observer was asked and failed: the window stayed pending
        # the first turn prices the window once; the later ones only what is new
        assert per_turn[1] < 1_000 and per_turn[2] < 1_000, per_turn
