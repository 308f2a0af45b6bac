"""Erasing a record erases the copies the learn agent made of it (helper-161).

The learn agent writes, for each record a skill is learned from, an evidence record holding that
record's whole text ("Procedure: <text>. Evidence source: <id>.") and the skill node's content
("Procedure: <the last support's text>"). ``Knowledge.erase`` ("no history keeps them", and
LangGraph's delete) erased the record and the pins repeating it, never those copies: the erased
text stayed in the store, in the review queue (the evidence is a candidate) and in search.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents
from obsmem.knowledge.store.scopes import Scope
from obsmem.storage import open_store

pytestmark = pytest.mark.anyio

T1 = Scope("acme", "alice", "t1")
FIRST = "I always take my blue heart medication pills before breakfast"
SECOND = "I always take the blue heart medication pills early, before coffee"
EVERYTHING = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    clock = FakeClock()
    graph = Knowledge.in_memory(clock=clock) if request.param == "memory" else Knowledge.sqlite(
        tmp_path / "k.db", clock=clock)
    async with graph:
        yield graph


async def _texts(knowledge: Knowledge) -> list[str]:
    dump = await knowledge.store.dump_scope(T1.key)
    return [r.text for r in dump.records] + [n.content or "" for n in dump.nodes]


@pytest.mark.parametrize("erased", [FIRST, SECOND])
async def test_erasing_a_support_erases_its_learned_copies(knowledge: Knowledge, erased: str) -> None:
    user = await knowledge.node("User", "person", "org:acme/resource:alice")
    records = {text: await knowledge.append(user.id, text, T1.key, reason="said", source_thread_id="t1")
               for text in (FIRST, SECOND)}
    async with open_store("memory://") as store:
        agents = KnowledgeAgents(knowledge, store, AgentSettings(), clock=FakeClock())
        report = await agents.learn(T1, "t1")
    assert len(report.written) == 2, report
    assert [t for t in await _texts(knowledge) if erased in t][1:]  # control: copied by learn

    await knowledge.erase([records[erased].id], T1.key, reason="the user asked")
    assert [t for t in await _texts(knowledge) if erased in t] == []
    assert not [h for h in await knowledge.search("blue heart medication pills", T1.key, view=EVERYTHING)
                if erased in h.text]
    kept = next(text for text in (FIRST, SECOND) if text != erased)
    assert [r.id for r in (await knowledge.store.list_about(user.id, T1.key)).items] == [records[kept].id]
