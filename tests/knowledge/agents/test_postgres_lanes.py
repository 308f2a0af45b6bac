"""Lane state on PostgreSQL: two processes (two store connections) share cursor and backoff."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents
from obsmem.knowledge.agents.curate import CurateAgent
from obsmem.storage import open_store
from tests.knowledge.agents.conftest import observation

pytestmark = pytest.mark.anyio


async def test_backoff_and_cursor_are_shared_through_postgres(postgres_url: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    async with Knowledge.postgres(postgres_url, clock=clock) as knowledge, open_store(postgres_url) as one, \
            open_store(postgres_url) as two:
        first = KnowledgeAgents(knowledge, one, AgentSettings(curate_after_records=1), clock=clock, owner="p1")
        second = KnowledgeAgents(knowledge, two, AgentSettings(curate_after_records=1), clock=clock, owner="p2")
        scope = first.scope("acme", "alice", "t1")
        run = await first.capture(observation(
            "* 🔴 (09:00) User stated their number is +49 151 5550 7720.",
            "* 🔴 (09:30) User stated their number is now +49 176 5550 3381.",
        ), scope, source_thread_id="t1")
        assert len(run.written) == 2
        original = CurateAgent._curate

        async def always_fails(self: CurateAgent, record: Any, context: Any, report: Any) -> None:
            raise RuntimeError("model went away")

        monkeypatch.setattr(CurateAgent, "_curate", always_fails)
        assert (await first.curate_if_due(scope, "t1")).status == "failed"
        assert (await second.curate_if_due(scope, "t1")).status == "skipped"  # sees the backoff
        state = await second.lanes.read(CurateAgent.lane("t1"))
        assert state.failures == 1 and state.next_attempt_at == clock.now() + timedelta(seconds=60)
        monkeypatch.setattr(CurateAgent, "_curate", original)
        clock.advance(60)
        done = await second.curate_if_due(scope, "t1")
        assert done.status == "ran" and len(done.removed) == 1
        assert (await first.lanes.read(CurateAgent.lane("t1"))).cursor == done.cursor
