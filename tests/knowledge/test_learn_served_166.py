"""The learn agent learns only from served records, and a skill stops serving what stopped being
served (helper-166).

Under the default "candidate" trust, learn built a skill node (its name, and "Procedure: <text>" as
its content) from records still pending review: ``Knowledge.search`` served it before anyone had
approved them, and still served it, quoting them, after every support was rejected.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, TrustState
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents
from obsmem.storage import open_store

pytestmark = pytest.mark.anyio

FIRST = "I always book an aisle seat when flying with Ida"
SECOND = "when flying, I always book the aisle seat next to Ida"
THIRD = "I always book the aisle seat next to Ida whenever we are flying to Oslo"
QUERY = "aisle seat Ida flying"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    clock = FakeClock()
    if request.param == "memory":
        graph = Knowledge.in_memory(clock=clock)
    elif request.param == "sqlite":
        graph = Knowledge.sqlite(tmp_path / "k.db", clock=clock)
    else:
        graph = Knowledge.postgres(request.getfixturevalue("postgres_url"), clock=clock)
    async with graph:
        yield graph


def _observation(line: str, day: str) -> str:
    return f"Date: {day}\n* 🔴 (09:00) {line}"


async def _served(knowledge: Knowledge, scope: str) -> list[str]:
    return [hit.text for hit in await knowledge.search(QUERY, scope)]


async def test_captured_candidates_teach_no_skill_and_rejecting_them_leaves_none(knowledge: Knowledge) -> None:
    org = f"acme{uuid.uuid4().hex[:8]}"
    async with open_store("memory://") as main:
        agents = KnowledgeAgents(knowledge, main, AgentSettings(), clock=FakeClock())  # trust: candidate
        scope = agents.scope(org, "alice", "t1")
        await agents.capture(_observation("User stated they always book an aisle seat when flying with Ida.",
                                          "Mar 3, 2025"), scope, source_thread_id="t1")
        await agents.capture(_observation("User stated when flying, always book the aisle seat next to Ida.",
                                          "Mar 5, 2025"), scope, source_thread_id="t1")
        pending = (await knowledge.review.pending(scope.key)).items
        assert len(pending) == 2, [r.text for r in pending]  # control: both captured, both pending
        await agents.learn(scope, "t1")

        assert not [t for t in await _served(knowledge, scope.key) if "skill" in t or "aisle" in t]
        assert len((await knowledge.review.pending(scope.key)).items) == 2  # no evidence of a skill either
        for record in pending:
            await knowledge.review.reject(record.id, scope.key, reason="not true")
        await agents.learn(scope, "t1")
        assert not [t for t in await _served(knowledge, scope.key) if "aisle" in t]


async def test_candidates_count_once_approved(knowledge: Knowledge) -> None:
    org = f"acme{uuid.uuid4().hex[:8]}"
    t1 = f"org:{org}/resource:alice/thread:t1"
    user = await knowledge.node("User", "person", f"org:{org}/resource:alice")
    first = await knowledge.append(user.id, FIRST, t1, reason="captured", trust=TrustState.CANDIDATE,
                                   source_thread_id="t1")
    second = await knowledge.append(user.id, SECOND, t1, reason="captured", trust=TrustState.CANDIDATE,
                                    source_thread_id="t1")
    async with open_store("memory://") as main:
        agents = KnowledgeAgents(knowledge, main, AgentSettings(), clock=FakeClock())
        scope = agents.scope(org, "alice", "t1")
        report = await agents.learn(scope, "t1")
        assert report.written == []
        assert not [t for t in await _served(knowledge, t1) if t.startswith("skill")]

        for record in (first, second):
            await knowledge.review.approve(record.id, t1, reason="true")
        await knowledge.append(user.id, THIRD, t1, reason="said", source_thread_id="t1")
        report = await agents.learn(scope, "t1")
        assert len(report.written) >= 2, report  # learned now, from approved records
        assert [t for t in await _served(knowledge, t1) if t.startswith("skill")]


@pytest.mark.parametrize("how", ["remove", "tombstone", "edit"])
async def test_a_skill_whose_supports_stop_being_served_is_not_served(knowledge: Knowledge, how: str) -> None:
    org = f"acme{uuid.uuid4().hex[:8]}"
    t1 = f"org:{org}/resource:alice/thread:t1"
    user = await knowledge.node("User", "person", f"org:{org}/resource:alice")
    records = [await knowledge.append(user.id, text, t1, reason="said", source_thread_id="t1")
               for text in (FIRST, SECOND)]
    async with open_store("memory://") as main:
        agents = KnowledgeAgents(knowledge, main, AgentSettings(), clock=FakeClock())
        report = await agents.learn(agents.scope(org, "alice", "t1"), "t1")
    assert len(report.written) == 2, report
    assert [t for t in await _served(knowledge, t1) if t.startswith("skill")]  # control: served

    gone = records[1]  # the one the skill's content quotes
    if how == "edit":
        await knowledge.review.edit(gone.id, t1, "I prefer a window seat", reason="corrected")
    else:
        await knowledge.remove(gone.id, t1, reason="not true", tombstone=how == "tombstone")
    served = await _served(knowledge, t1)
    assert not [t for t in served if t.startswith("skill")], served
    assert not [t for t in served if SECOND in t], served
    assert not [r.text for r in (await knowledge.review.pending(t1)).items if SECOND in r.text]
    node = next(n for n in (await knowledge.store.dump_scope(t1)).nodes if n.kind == "skill")
    assert SECOND not in (node.content or "")
