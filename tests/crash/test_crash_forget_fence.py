"""A forget SIGKILLed midway holds the thread's observation back for at most 15 minutes, as
documented, even when forgets run after it.

Found by hostile review 111: the fence a forget keeps on the observation record counted forgets
begun and forgets ended. The dead one never ended, so from then on the record always said one was
running, and the 15 minutes were counted from the *latest* forget's start: the same forget run
again after the restart (or any later one) held every observation of the thread back ("a forget
changed the stored messages while they were observed") for 15 minutes after itself, each time,
for good. Now each forget takes its own mark off when it ends: the dead one's lapses 15 minutes
after it began.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock

from .crash_child import SECRET, config
from .harness import kill_at

pytestmark = pytest.mark.anyio


async def test_a_dead_forget_lapses_15_minutes_after_it_began_whatever_runs_after_it(tmp_path: Path) -> None:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at("forget:lineage", db, tmp_path / "run")  # messages forgotten, records not yet
    later = FakeClock(start=datetime.now(UTC) + timedelta(minutes=16))  # the app restarts 16 minutes on

    async with Memory(f"sqlite:///{db}", config=config(buffered=False), max_turn_wait=None, clock=later) as memory:
        await memory.forget(SECRET, resource_id="alice")  # run again, to its end
        await memory.forget("Pip3", resource_id="alice")  # and another one
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("My dog Rex likes the park.")])
        await turn.end([Message.assistant("Nice.")])

        outcome = await memory.observe("t1")

        assert outcome.applied, outcome.reason
        assert "Rex" in await memory.get_observations("t1")
        assert SECRET not in await memory.get_observations("t1")
