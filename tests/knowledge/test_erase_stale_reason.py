"""Erasing a record must leave no quote of it in the audit log, also where curation removed a plan
at the resource as stale because of it (179f5ed covered only removals with superseded_by).

Curation's stale-plan removal ("stale: <id> says it is done: “plan” → “<the erased record's
text>”") sets no superseded_by, so erasure.py's _superseded_scopes never reads the plan's scope
(the resource, where the event is logged): Knowledge.erase of the thread's record (and
Memory.delete_thread of its thread) leaves its text, here a passport number, in the resource's
audit log and the file. By reading curate.py (not run here), the near-duplicate removal
("duplicate of <keep>: … (“drop” ≈ “keep”)") and the corrected one ("superseded by <id>: the
user corrected …", changed=False) set no superseded_by either, so they were left the same
way when the two records live in different scopes; the resource scope above the erased thread
record is now read for all of them. And a plan the org holds, made stale by a thread's or a
resource's record, kept its reason in the org's log after 03c5d87 too (4f47201: each broader
scope where a record of the node was removed is read)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ORG = "org:default"
RESOURCE = "org:default/resource:alice"
THREAD = "org:default/resource:alice/thread:t1"
CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False}, knowledge={"trust": "verified"})
SECRET = "ZX-4471"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    graph = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with graph:
        yield graph


async def _quotes(knowledge: Knowledge, tmp_path: Path) -> list[str]:
    found = []
    for scope in (THREAD, RESOURCE, ORG):
        page = await knowledge.store.list_activity(scope, limit=1000)
        found += [e.reason for e in page.items if SECRET in e.reason]
    db = tmp_path / "k.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            found += [doc for (doc,) in conn.execute("SELECT doc FROM knowledge_events") if SECRET in doc]
    return found


@pytest.mark.parametrize("how", ["erase", "delete_thread"])
async def test_erasing_the_record_that_made_a_plan_stale_leaves_no_quote(
    knowledge: Knowledge, tmp_path: Path, how: str
) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
            await turn.step([Message.assistant("Hi.")])
        user = await knowledge.node("User", "person", RESOURCE)
        await knowledge.append(user.id, "They will renew their passport at the consulate in March", RESOURCE,
                               reason="from the CRM", when="2025-01-01")
        done = await knowledge.append(user.id, f"They renewed their passport at the consulate, done: new passport "
                                      f"{SECRET}", THREAD, reason="said", when="2025-02-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert run.removed and SECRET in run.removed[0][1]  # the plan went, its reason quoting the new record
        assert await _quotes(knowledge, tmp_path)  # control
        if how == "erase":
            await knowledge.erase([done.id], THREAD, reason="the user asked")
        else:
            await memory.delete_thread("t1")
        assert await _quotes(knowledge, tmp_path) == []


@pytest.mark.parametrize(("how", "where"), [("erase", THREAD), ("erase", RESOURCE), ("delete_thread", THREAD)])
async def test_org_plan_made_stale_then_erased(knowledge: Knowledge, tmp_path: Path, how: str, where: str) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
            await turn.step([Message.assistant("Hi.")])
        user = await knowledge.node("User", "person", ORG)
        plan = await knowledge.append(user.id, "They will renew their passport at the consulate in March", ORG,
                                      reason="from the CRM", when="2025-01-01")
        done = await knowledge.append(user.id, f"They renewed their passport at the consulate, done: new passport "
                                      f"{SECRET}", where, reason="said", when="2025-02-01", source_thread_id="t1")
        # Curation no longer removes an org's record because of a narrower one (helper 180); a store
        # holds such removals from before, written as curation wrote them then.
        await knowledge.store.remove_record(plan.id, THREAD, actor="curate", reason=(
            f"stale: {done.id} says it is done: “{plan.text}” → “{done.text}” (stated 2025-02-01)"))
        assert await _quotes(knowledge, tmp_path)  # control: the removal quoted it
        if how == "erase":
            await knowledge.erase([done.id], where, reason="the user asked")
        else:
            await memory.delete_thread("t1")
        assert await _quotes(knowledge, tmp_path) == []
