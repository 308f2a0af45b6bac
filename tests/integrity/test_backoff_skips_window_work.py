"""A revoked key: the observer fails at once, every time, and backs off (``failure_policy=
"warn"``: each turn goes on). While it backs off no boundary can observe anything, yet every
boundary's memory work read the whole pending window again, counted it and planned an
observation, only to skip the model call: with 10,000 messages pending, about a quarter of a
second a boundary on top of the turn. It must cost no more than the turn's own cut of the window
(its newest messages, as when memory is behind), and the outcome must still say why nothing was
observed."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from obsmem import EngineEvent, Memory, Message
from obsmem.clock import SystemClock
from obsmem.config import MemoryConfig
from obsmem.models.testing import FunctionModel
from obsmem.errors import ModelRequestError

from .test_pending_window_work import _Tally, backlog, behind

pytestmark = pytest.mark.anyio

PENDING = 10_000


class _Revoked:
    """A memory model whose key was revoked: every call refused at once."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Message], settings: Any) -> str:
        self.calls += 1
        raise ModelRequestError("401: invalid API key")


async def _turn(memory: Memory, i: int) -> Any:
    turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"question {i}")])
    assert turn.context.messages[-1].text == f"question {i}", "the input is shown"
    await turn.step([Message.assistant(f"answer {i}")])
    await turn.end()
    return turn


class _Clock(SystemClock):
    """The real clock, moved ``ahead`` seconds."""

    ahead = 0.0

    def now(self) -> datetime:
        return super().now() + timedelta(seconds=self.ahead)


async def _backing_off(
    tmp_path: Path, pending: int, clock: _Clock | None = None
) -> tuple[Memory, list[EngineEvent], _Revoked]:
    """A memory whose observer failed twice on ``pending`` messages, now backing off."""
    events: list[EngineEvent] = []
    model = _Revoked()
    memory = behind(tmp_path, fail=model, failure_policy="warn", on_event=events.append, clock=clock or _Clock())
    await backlog(memory, "t1", pending)
    for i in range(3):
        await _turn(memory, i)
        await memory.settled()
    assert any(e.kind == "observation-backoff" for e in events), [e.kind for e in events]
    return memory, events, model


async def test_a_backing_off_observer_does_not_make_each_boundary_reread_the_window(tmp_path: Path) -> None:
    memory, events, model = await _backing_off(tmp_path, PENDING)
    async with memory:
        calls = model.calls
        tally = _Tally(memory)
        seen = len(events)
        turns = [await _turn(memory, i) for i in range(3, 6)]
        await memory.settled()  # the boundaries' background work, if any, counted too
        boundaries = 6
        assert model.calls == calls, "no model call while it backs off"
        # Before: ~12,000 rows read and ~22,000 messages counted a boundary (the work read and
        # counted the whole window, planned an observation, then skipped the call).
        assert tally.rows / boundaries < PENDING / 5, f"{tally.rows} rows read in {boundaries} boundaries"
        assert tally.counted / boundaries < PENDING / 3, f"{tally.counted} messages counted in {boundaries} boundaries"
        for turn in turns:
            assert turn.context.trimmed > PENDING // 2, "the window is cut to the raw limit"
            assert any(not o.applied and "backing off" in o.reason for o in turn.outcomes), turn.outcomes
        assert "observation-backoff-skipped" in {e.kind for e in events[seen:]}
        stored = await memory.list_messages("t1")
        assert len([m for m in stored if not m.is_marker_only]) == PENDING + 12, "nothing pending is lost"


async def test_a_shorter_window_is_counted_once_a_boundary_while_backing_off(tmp_path: Path) -> None:
    pending = 2_000  # a window the engine keeps: read once, but counted three times a boundary before
    memory, _, _ = await _backing_off(tmp_path, pending)
    async with memory:
        tally = _Tally(memory)
        for i in range(3, 6):
            turn = await _turn(memory, i)
            assert turn.context.trimmed > 0
        await memory.settled()
        # Before: ~6,200 a boundary (the window, the context built ahead and the planned
        # observation); now the cut's one count.
        assert tally.counted / 6 < 1.5 * pending, f"{tally.counted} messages counted in 6 boundaries"


async def test_when_the_backoff_ends_the_observer_is_called_again(tmp_path: Path) -> None:
    clock = _Clock()
    memory, _, model = await _backing_off(tmp_path, 2_000, clock)
    async with memory:
        calls = model.calls
        clock.ahead = 3_600.0  # past any backoff (15 minutes at most)
        await _turn(memory, 3)
        await memory.settled()
        assert model.calls > calls, "the work runs again once the backoff is over"



async def test_a_skipped_boundary_still_reports_a_reflector_backing_off(tmp_path: Path) -> None:
    """Synchronous mode, observations past the reflection threshold, both models refused: the
    boundary whose work is skipped reports both skips, as the step reported them (helper 176)."""
    answered = {"left": 3}

    def observer(messages: list[Message], settings: Any) -> str:
        if answered["left"] == 0:
            raise ModelRequestError("401: invalid API key")
        answered["left"] -= 1
        lines = "\n".join(f"* 🔴 (10:0{i}) User said fact {i} about the shipment to Lisbon." for i in range(30))
        return f"<observations>\nDate: Jun 15, 2025\n{lines}\n</observations>"

    events: list[EngineEvent] = []
    memory = Memory(
        f"sqlite:///{tmp_path / 'memory.db'}",
        config=MemoryConfig(observation={"message_tokens": 300, "buffer_tokens": False},
                            reflection={"observation_tokens": 400}),  # fmt: skip
        observer=FunctionModel(observer, name="test:observer"), reflector=FunctionModel(_Revoked(), name="test:r"),
        max_turn_wait=0.05, failure_policy="warn", on_event=events.append,
    )
    async with memory:
        for i in range(30):
            turn = await memory.begin_turn(thread_id="t", resource_id="u",
                                           messages=[Message.user(f"question {i} " + "garden words " * 20)])  # fmt: skip
            await turn.end([Message.assistant(f"answer {i} " + "reply words " * 10)])
            await memory.settled()
        seen = len(events)
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("final " + "garden " * 30)])
        await turn.step([Message.assistant("ok")])
        kinds = {e.kind for e in events[seen:]}
        assert {"observation-backoff-skipped", "reflection-backoff-skipped"} <= kinds, kinds
