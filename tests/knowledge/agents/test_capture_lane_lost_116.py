"""Two knowledge workers on one SQLite database: a capture whose lane lease ran out mid-run (a
long model call, a paused process) must not write what the worker that took the lane over
captures too (helper-116; a previous review saw 4 records for 2 facts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

from tests.knowledge.agents.alice import START

pytestmark = pytest.mark.anyio

ALL = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
SAID = "I work as a nurse at the Charité hospital. My dog is called Kiwi and she is a beagle."


def config() -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                        knowledge={"curate_max_age_s": None})  # fmt: skip


class Paused(SQLiteKnowledgeStore):
    """Worker A's view of the shared knowledge database: once A has read the node's records (its
    capture is under way), A stalls for longer than the lane's lease while ``meanwhile`` runs."""

    meanwhile: Any = None

    async def list_about(self, *args: Any, **kwargs: Any) -> Any:
        page = await super().list_about(*args, **kwargs)
        if self.meanwhile is not None:
            work, self.meanwhile = self.meanwhile, None
            await work()
        return page


async def _records(knowledge: Knowledge, memory: Memory) -> list[str]:
    assert memory.knowledge_agents is not None
    scope = memory.knowledge_agents.scope(None, "alice", "t1")
    user = await knowledge.store.resolve_node("User", scope.key)
    if user is None:
        return []
    return [r.text for r in (await knowledge.store.list_about(user.id, scope.key, view=ALL, limit=100)).items
            if r.deleted_at is None]


@pytest.mark.parametrize("main", ["sqlite", "postgres"])
async def test_a_capture_that_lost_its_lane_writes_nothing_the_new_holder_captures(
    tmp_path: Path, anyio_backend: str, main: str, request: pytest.FixtureRequest
) -> None:
    """The two workers share the main store (the lanes' leases and state: SQLite or PostgreSQL)
    and the knowledge store (one SQLite file)."""
    clock = FakeClock(start=START)
    url = f"sqlite:///{tmp_path / 'main.db'}" if main == "sqlite" else request.getfixturevalue("postgres_url")
    async with Memory(url, config=config(), clock=clock) as app:  # observed, nothing captured yet
        async with app.turn(thread_id="t1", resource_id="alice", messages=[Message.user(SAID)]) as turn:
            await turn.step([Message.assistant("Noted.")])
        await app.observe("t1")
        await app.settled()
    paused = Paused(tmp_path / "k.db", clock=clock)
    async with Knowledge(paused) as graph_a, Knowledge.sqlite(tmp_path / "k.db", clock=clock) as graph_b:
        async with Memory(url, config=config(), knowledge=graph_a, clock=clock) as a, \
                Memory(url, config=config(), knowledge=graph_b, clock=clock) as b:

            async def lease_runs_out() -> None:
                clock.advance(601)  # past the lane's 600 s lease: worker B takes the lane over
                taken = await b.capture_knowledge("t1")
                assert sum(len(run.written) for run in taken) >= 2

            paused.meanwhile = lease_runs_out
            await a.capture_knowledge("t1")
            assert paused.meanwhile is None  # A's capture did stall mid-run
            texts = await _records(graph_b, b)
            assert len(texts) == len(set(texts)), texts  # each fact once
            assert len(texts) >= 2 and any("Kiwi" in t for t in texts), texts
            # The lane's cursor is the new holder's; a later catch-up finds nothing to capture again.
            again = await a.capture_knowledge("t1")
            assert all(run.written == [] for run in again)
            assert len(await _records(graph_b, b)) == len(texts)
