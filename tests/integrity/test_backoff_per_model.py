"""A failure backoff stops the model that failed, not another process's healthy one.

The backoff is stored on the shared record so that every process on the store leaves a failing
model alone. But it stopped every model of the role: a worker whose key was wrong (every call
failing) also stopped the application's own observer, healthy, for up to 15 minutes, and the
application's context was cut meanwhile (its messages left out, no observation standing for them;
found by helper 203). The backoff now names the model that failed; another model is not stopped
by it (a process running the same model is, as before).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.engine.helpers import Conversation, fake_clock
from tests.integrity.test_durable_backoff import Flaky, backoff_of, run_turns, sync_config

from obsmem import Memory
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio


async def test_another_model_is_not_stopped_by_a_failing_ones_backoff(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    clock, conv = fake_clock(), Conversation()
    broken = Flaky()
    async with Memory(db, config=sync_config(), observer=FunctionModel(broken, name="worker:bad-key"),
                      reflector="offline", clock=clock, failure_policy="warn") as worker:  # fmt: skip
        await run_turns(worker, conv, clock, 6)
        record = await worker.get_record("t1")
        assert record is not None
        entry = backoff_of(record.metadata, "observation")
        assert entry is not None and entry["failures"] >= 2

    same = Flaky()  # the same model in another process: still left alone (the control)
    async with Memory(db, config=sync_config(), observer=FunctionModel(same, name="worker:bad-key"),
                      reflector="offline", clock=clock, failure_policy="warn") as other:  # fmt: skip
        await run_turns(other, conv, clock, 2, start=6)
        assert same.calls == 0

    healthy = Flaky()
    healthy.healthy = True
    async with Memory(db, config=sync_config(), observer=FunctionModel(healthy, name="app:good-key"),
                      reflector="offline", clock=clock, failure_policy="warn") as app:  # fmt: skip
        await run_turns(app, conv, clock, 1, start=8)
        assert healthy.calls >= 1
        record = await app.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        assert backoff_of(record.metadata, "observation") is None  # its success cleared it
    assert entry["model"] == "llm:worker:bad-key"  # what the backoff names
