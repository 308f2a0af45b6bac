"""Revising a long record after a batch of finished tasks is linear work offline.

Found by timing ``OfflineObserver.revise_active`` (what each observation cycle runs on the
older lines, with the new ones): every older "User asked/said/stated …" line was checked against
every task the new lines report finished, a name pattern search per pair: 500 older lines and
100 tasks took 0.32 s, 2,000 and 400 took 3.8 s, every cycle. Counted here through
``Memory.observe``: the searches made by name patterns compiled while observing, wherever the
offline rules compile them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.om.offline import observer, patterns, reflector

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)
ONE_BATCH = MemoryConfig(observation=ObservationConfig(message_tokens=2_000_000, max_tokens_per_batch=1_000_000))


class _Searches:
    count = 0


class _Pattern:
    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern

    def search(self, *args: Any, **kwargs: Any) -> Any:
        _Searches.count += 1
        return self._pattern.search(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)


class _Re:
    """``re`` as an offline module sees it: patterns compiled from now on count their searches."""

    def compile(self, *args: Any, **kwargs: Any) -> _Pattern:
        return _Pattern(re.compile(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


def _statements(count: int) -> list[Message]:
    return [Message.user(f"My colleague Vexa{i} moved to Tarnow{i} last year.", created_at=T0 + timedelta(seconds=i))
            for i in range(count)]  # fmt: skip


def _finished(count: int) -> list[Message]:
    later = T0 + timedelta(days=1)
    return [Message.user(f"I finished the Zorblat{i} report.", created_at=later + timedelta(seconds=i))
            for i in range(count)]  # fmt: skip


@pytest.fixture
def revised(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OBSMEM_OFFLINE_PROCESS", "0")  # the rules in this process (a thread)
    for module in (patterns, reflector, observer):
        monkeypatch.setattr(module, "re", _Re())

    async def run(count: int) -> tuple[int, str]:
        async with Memory("memory://", config=ONE_BATCH) as memory:
            await memory.create_thread("t1", resource_id="r")
            await memory.save_messages("t1", _statements(count))
            await memory.observe("t1")
            await memory.save_messages("t1", _finished(count))
            _Searches.count = 0
            outcome = await memory.observe("t1")
            record = await memory.get_record("t1")
        assert outcome.error is None
        assert record is not None
        return _Searches.count, record.active_observations

    return run


async def test_revising_many_statements_after_many_finished_tasks_is_linear_work(revised: Any) -> None:
    small, observations = await revised(100)
    assert observations.count("Vexa") == 100  # no statement was about a finished task: all kept
    assert observations.count("User finished the Zorblat") == 100
    large, observations = await revised(400)
    assert observations.count("Vexa") == 400
    assert large / small < 6, f"4x the lines and tasks: {large / small:.1f}x the searches ({small:,} -> {large:,})"
