"""A batch of many tasks reported finished is observed in linear work by the offline observer.

Found by timing the offline observer on a work log: the user asks for help with a task, the
assistant answers, the user reports it finished, a few hundred times in one batch (about 30
tokens a task: 250 of them fit the default ``max_tokens_per_batch``). Before its lines were
rendered, the observer asked of every "User finished the …" line and every "User asked …" line
whether it is about each finished task (:func:`~obsmem.om.offline.patterns.task_mentioned`),
reading each task's names again on every question: 250 tasks took 2.4 s, 500 took 10.8 s,
1,000 took 164 s under load. Counted here: the calls of the name finder (``names``), wherever
the offline rules hold it.
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


def _work_log(tasks: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(tasks):
        at = T0 + timedelta(seconds=3 * i)
        messages += [
            Message.user(f"Can you help me with the Zorblat{i} report?", created_at=at),
            Message.assistant(f"Sure, start with the Zorblat{i} summary section.", created_at=at + timedelta(seconds=1)),
            Message.user(f"I finished the Zorblat{i} report.", created_at=at + timedelta(seconds=2)),
        ]
    return messages


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function: the observations of a work log, and the calls of ``names`` made for them."""
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
        calls[0] = 0
        async with Memory("memory://", config=ONE_BATCH) as memory:
            await memory.create_thread("t1", resource_id="r")
            await memory.save_messages("t1", _work_log(tasks))
            await memory.observe("t1")
            record = await memory.get_record("t1")
        assert record is not None
        return calls[0], record.active_observations

    return run


async def test_a_batch_of_finished_tasks_is_observed_in_linear_work(observed: Any) -> None:
    small, observations = await observed(100)
    # each task keeps its ✅ line, and the ask about it is stale once it is finished
    assert observations.count("User finished the Zorblat") == 100
    assert "User asked" not in observations
    large, observations = await observed(400)
    assert observations.count("User finished the Zorblat") == 400
    assert large / small < 6, f"4x the tasks: {large / small:.1f}x the name searches ({small:,} -> {large:,})"
