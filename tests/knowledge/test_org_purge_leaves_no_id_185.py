"""Purging an org leaves no row that names it (helper-185).

Before, the purge's one ``scope-purged`` event was logged "at the parent scope", which for an
org is the org itself: ``org:acme`` stayed in the audit table (list_activity('org:acme') showed
it, list_scopes() still listed the org, the SQLite file held the id) after everything under it
was deleted. A resource's or a thread's purge still logs its event above it (controls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import ActivityAction
from obsmem.knowledge.store.values import forgotten_digest

pytestmark = pytest.mark.anyio

ORG = "org:acmeq7"
OTHER = "org:otherz4"


async def _fill(knowledge: Knowledge) -> None:
    for resource in ("alice", "bob"):
        scope = f"{ORG}/resource:{resource}/thread:t-{resource}"
        user = await knowledge.node("User", "person", f"{ORG}/resource:{resource}")
        record = await knowledge.append(user.id, f"their dog is called Kiki [[Project {resource}]]", scope,
                                        reason="said")
        await knowledge.remove(record.id, scope, reason="the user took it back")
        await knowledge.append(user.id, "they live in Berlin", scope, reason="said")
    company = await knowledge.node("Acme", "organization", ORG)
    await knowledge.append(company.id, "the office is in Munich", ORG, reason="from the CRM")
    await knowledge.store.forget_value("Kiki", ORG, actor="privacy", reason="the user asked")
    keep = await knowledge.node("Keep", "organization", OTHER)
    await knowledge.append(keep.id, "the office is in Lyon", OTHER, reason="from the CRM")
    await knowledge.drain()


async def test_an_org_purge_leaves_no_row_at_the_org(knowledge: Knowledge) -> None:
    await _fill(knowledge)
    counts = await knowledge.store.purge_scope(ORG, actor="admin", reason="org deleted")
    assert counts["records"] == 3 and counts["nodes"] >= 3
    store = knowledge.store
    assert await store.list_scopes() == [OTHER]
    assert (await store.list_activity(ORG, limit=1000, threads=True)).items == []
    assert (await store.dump_scope(ORG)).counts() == dict.fromkeys(
        ("nodes", "records", "tombstones", "forgotten", "events"), 0)
    assert [v.scope for v in await store.list_vectors()] == [OTHER]
    assert {e.scope for e in await store.list_outbox(include_completed=True)} == {OTHER}
    # the other org is untouched, and its log names nothing of the purged one
    other = (await store.list_activity(OTHER, limit=1000)).items
    assert other and not [e for e in other if "acmeq7" in f"{e.scope} {e.reason} {e.details}"]


async def test_the_sqlite_file_keeps_no_trace_of_the_org_id(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with Knowledge.sqlite(path) as knowledge:
        await _fill(knowledge)
        await knowledge.store.purge_scope(ORG, actor="admin", reason="org deleted")
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("k.db"))
    assert b"acmeq7" not in data.lower()
    assert b"otherz4" in data  # control: the file is read


async def test_a_resource_purge_still_logs_its_event_at_the_org(knowledge: Knowledge) -> None:
    await _fill(knowledge)
    alice = f"{ORG}/resource:alice"
    await knowledge.store.purge_scope(alice, actor="admin", reason="resource deleted")
    events = [e for e in (await knowledge.store.list_activity(ORG, limit=1000)).items
              if e.action is ActivityAction.SCOPE_PURGED]
    assert [(e.scope, e.subject_id, e.reason) for e in events] == [
        (ORG, forgotten_digest(alice), "resource deleted")]
    assert alice not in await knowledge.store.list_scopes()
