"""Reflecting a log of many statements and tasks reported finished is linear work offline.

Found by timing the offline reflector on an observation log of N "User asked … the ZorblatN
report" lines and, later, N "User finished the ZorblatN report" lines: every reflection drops
the asks and statements about tasks finished since (and their parts of a "Topics:" line), and
it checked every "User asked/said/stated …" line against every task finished after it, reading
each task's names again per check: 100 -> 200 -> 400 tasks took 0.36 -> 0.84 -> 3.0 s (5,050 ->
20,100 -> 80,200 name searches). Asks about a task are dropped as soon as its end is observed;
what remains for the reflection to check is every other statement of the log.
Counted here through ``Memory.observe`` and ``Memory.reflect``: the calls of the name finder
(``names``) during the reflection, wherever the offline rules hold it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.om.offline import observer, participants, patterns, reflector, rules

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)
ONE_BATCH = MemoryConfig(observation=ObservationConfig(message_tokens=2_000_000, max_tokens_per_batch=1_000_000))


def _statements(tasks: int) -> list[Message]:
    return [Message.user(f"My colleague Vexa{i} moved to Tarnow{i} last year.", created_at=T0 + timedelta(seconds=i))
            for i in range(tasks)]  # fmt: skip


def _finished(tasks: int) -> list[Message]:
    later = T0 + timedelta(days=1)
    return [Message.user(f"I finished the Zorblat{i} report.", created_at=later + timedelta(seconds=i))
            for i in range(tasks)]  # fmt: skip


@pytest.fixture
def reflected(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function: the reflected observations of a work log, and the calls of ``names`` made
    while reflecting."""
    monkeypatch.setenv("OBSMEM_OFFLINE_PROCESS", "0")  # the rules in this process (a thread)
    calls = [0]
    original = patterns.names

    def names(text: str) -> list[str]:
        calls[0] += 1
        return original(text)

    for module in (patterns, rules, observer, participants, reflector):
        if hasattr(module, "names"):
            monkeypatch.setattr(module, "names", names)

    async def run(tasks: int) -> tuple[int, str]:
        async with Memory("memory://", config=ONE_BATCH) as memory:
            await memory.create_thread("t1", resource_id="r")
            await memory.save_messages("t1", _statements(tasks))
            await memory.observe("t1")
            await memory.save_messages("t1", _finished(tasks))
            await memory.observe("t1")
            record = await memory.get_record("t1")
            assert record is not None
            assert record.active_observations.count("Vexa") == tasks
            calls[0] = 0
            outcome = await memory.reflect("t1")
            assert outcome.error is None
            record = await memory.get_record("t1")
        assert record is not None
        return calls[0], record.active_observations

    return run


async def test_reflecting_many_asks_and_finished_tasks_is_linear_work(reflected: Any) -> None:
    small, observations = await reflected(100)
    assert observations.count("User finished the Zorblat") == 100
    assert observations.count("Vexa") == 100  # no statement was about a finished task
    large, observations = await reflected(400)
    assert observations.count("User finished the Zorblat") == 400
    assert large / small < 6, f"4x the tasks: {large / small:.1f}x the name searches ({small:,} -> {large:,})"
