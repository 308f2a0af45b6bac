"""Adaptive buffering through the engine: on a fake clock whose observer calls take time, a buffer
starts only at the last step that lands before the threshold, never when a synchronous
observation would overtake it, and nothing is thrown away."""

from __future__ import annotations

from collections import Counter

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.om.outcomes import EngineEvent
from obsmem.om.protocols import ObservationRequest, ObservationResult

from .helpers import Conversation, chat_turns, fake_clock
from .test_buffered import CountingObserver, buffered_config

pytestmark = pytest.mark.anyio


class SlowObserver(CountingObserver):
    """The counting offline observer whose every call takes ``latency_s`` on the engine's clock."""

    def __init__(self, clock: FakeClock, latency_s: float) -> None:
        super().__init__()
        self.clock = clock
        self.latency_s = latency_s

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        await self.clock.sleep(self.latency_s)
        return await super().observe(request)


async def run(latency_s: float, think_s: float, turns: int = 40) -> tuple[SlowObserver, Counter[str], list[bool]]:
    """``turns`` turns, the actor thinking ``think_s`` (fake) seconds each; buffers settle between turns."""
    clock = fake_clock()
    observer = SlowObserver(clock, latency_s)
    events: Counter[str] = Counter()

    def on_event(event: EngineEvent) -> None:
        events[event.kind] += 1

    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=clock, on_event=on_event)
    conv = Conversation()
    waited = []
    async with memory:
        for user_text, reply in chat_turns(turns):
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)])
            clock.advance(think_s)
            await turn.step([conv.assistant(reply)])
            await turn.end()
            waited.append(turn.waited)
            await memory.settled()
    return observer, events, waited


async def test_a_slow_actor_buffers_once_per_threshold_not_every_interval() -> None:
    fixed, fixed_events, fixed_waited = await run(latency_s=0.0, think_s=30.0)  # no latency: fixed interval
    adaptive, events, waited = await run(latency_s=1.0, think_s=30.0)
    assert fixed.sync_calls == adaptive.sync_calls == 0
    assert not any(fixed_waited) and not any(waited)
    assert events["activation"] >= 3  # the window crossed the threshold several times
    # The fixed interval buffers every buffer_tokens; the adaptive one about once per activation.
    assert adaptive.buffer_calls < fixed.buffer_calls
    assert adaptive.buffer_calls <= events["activation"] + 2
    assert events["buffer-dropped"] == fixed_events["buffer-dropped"] == 0


async def test_an_instant_actor_starts_no_buffer_a_synchronous_observation_would_overtake() -> None:
    observer, events, waited = await run(latency_s=1.0, think_s=0.0)
    # The first buffer starts before any latency is known; after that none is worth a call.
    assert observer.buffer_calls <= 1
    assert observer.sync_calls >= 3
    assert events["buffer-dropped"] == 0
    assert sum(waited) == observer.sync_calls
