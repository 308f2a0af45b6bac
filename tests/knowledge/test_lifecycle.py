"""Forgetting a value and purging a scope in the knowledge store, on every adapter: hard deletes
that leave no trace of the text in any knowledge table, a forgotten value kept only as a digest
that refuses the value's return (audited without the text), and the restoring write export uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import ImportConflictError, InvalidInputError, TombstonedValueError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.capture import capture
from obsmem.knowledge.lifecycle import forget_value, knowledge_scopes, purge_resource, summed
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import (
    FORGOTTEN_PLACEHOLDER,
    ActivityAction,
    RecordDraft,
    RecordView,
    TrustState,
)
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.values import forget_key, forgotten_digest, forgotten_in
from obsmem.types import Thread

from ..lifecycle_delete.scan import scan_knowledge

pytestmark = pytest.mark.anyio

SENTINEL = "QZXKNOW77"
ORG = "org:acme"
RES = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
T2 = "org:acme/resource:alice/thread:t2"
BOB = "org:acme/resource:bob"
ALL = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def kstore(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[TablesKnowledgeStore]:
    store: TablesKnowledgeStore
    clock = FakeClock()
    if request.param == "memory":
        store = InMemoryKnowledgeStore(clock=clock)
    elif request.param == "sqlite":
        store = SQLiteKnowledgeStore(tmp_path / "knowledge.db", clock=clock)
    else:
        store = PostgresKnowledgeStore(request.getfixturevalue("postgres_url"), clock=clock)
    async with store:
        yield store


async def plant(knowledge: Knowledge, secret: str, res: str = RES) -> dict[str, str]:
    """The secret in a node name, a node's content and description, record texts (thread and
    resource level, a candidate, a soft-deleted one, a link), a record's reason, a tombstone, a
    refused write's audit event and (after a drain) vectors; plus records that do not hold it."""
    t1 = f"{res}/thread:t1"
    agent = await knowledge.node(f"Agent {secret}", "person", res)
    jane = await knowledge.node(
        "Jane", "person", res, content=f"Jane's codename is {secret}", description=f"codename {secret}"
    )
    ids = {"agent": agent.id, "jane": jane.id}
    ids["badge"] = (await knowledge.append(jane.id, f"Jane's badge reads {secret}", t1, reason="said so")).id
    ids["lower"] = (
        await knowledge.append(jane.id, f"her pin is {secret.lower()}!", res, reason="said so")
    ).id
    ids["link"] = (
        await knowledge.append(jane.id, f"Jane works with [[Agent {secret}]]", res, reason="said so")
    ).id
    ids["about_agent"] = (await knowledge.append(agent.id, "Prefers tea", t1, reason="said so")).id
    ids["candidate"] = (
        await knowledge.append(jane.id, f"maybe {secret}", t1, reason="guess", trust=TrustState.CANDIDATE)
    ).id
    old = await knowledge.append(jane.id, f"old note {secret}", res, reason="said so")
    await knowledge.remove(old.id, res, reason="outdated", tombstone=True)
    ids["old"] = old.id
    ids["reason"] = (await knowledge.append(jane.id, "Jane likes jazz", t1, reason=f"user said {secret}")).id
    await knowledge.store.add_tombstone(jane.id, res, f"{secret} alias", actor="tester", reason="wrong")
    with pytest.raises(TombstonedValueError):
        await knowledge.append(jane.id, f"{secret} alias", t1, reason="retry")
    ids["keep"] = (await knowledge.append(jane.id, "Jane lives in [[Berlin]]", res, reason="said so")).id
    ids["keep_thread"] = (await knowledge.append(jane.id, "Jane drinks coffee", t1, reason="said so")).id
    await knowledge.drain()
    return ids


async def test_forget_leaves_no_trace_and_refuses_the_value_again(kstore: TablesKnowledgeStore) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    ids = await plant(knowledge, SENTINEL)
    assert scan_knowledge(kstore, SENTINEL) and scan_knowledge(kstore, SENTINEL.lower())
    vectors_before = {v.record_id for v in await kstore.list_vectors()}
    assert {ids["badge"], ids["link"], ids["about_agent"]} <= vectors_before

    counts = await forget_value(kstore, SENTINEL, RES, actor="privacy-officer", reason="user request 42")

    assert scan_knowledge(kstore, SENTINEL) == []
    assert scan_knowledge(kstore, SENTINEL.lower()) == []
    assert counts["nodes"] == 1 and counts["nodes_scrubbed"] == 1 and counts["forgotten"] == 1
    # badge, lower, link, about_agent, candidate, old, reason; the refused and tombstone events
    assert counts["records"] == 7 and counts["tombstones"] == 2 and counts["events"] >= 2
    assert counts["vectors"] >= 5 and counts["outbox"] >= 7
    for key in ("badge", "lower", "link", "about_agent", "candidate", "old", "reason"):
        assert await kstore.load_record(ids[key]) is None, key
    assert await kstore.load_node(ids["agent"]) is None
    jane = await kstore.get_node(ids["jane"], RES)
    assert jane is not None and jane.content is None and jane.description is None
    # What did not hold the value stays, with its vector.
    assert {r.id for r in (await kstore.list_about(ids["jane"], T1)).items} == {
        ids["keep"],
        ids["keep_thread"],
    }
    assert {v.record_id for v in await kstore.list_vectors()} == {ids["keep"], ids["keep_thread"]}
    assert {e.record_id for e in await kstore.list_outbox(include_completed=True)} <= {
        ids["keep"],
        ids["keep_thread"],
    }
    assert await knowledge.search(SENTINEL, T1) == []
    assert [h.id for h in await knowledge.search("Berlin", T1) if h.kind == "record"] == [ids["keep"]]

    # The audit log says what happened, by whom and why, and never the value.
    events = (await kstore.list_activity(T1, limit=1000)).items
    forgotten_events = [e for e in events if e.action is ActivityAction.VALUE_FORGOTTEN]
    assert len(forgotten_events) == 1
    event = forgotten_events[0]
    assert (event.actor, event.reason, event.scope) == ("privacy-officer", "user request 42", RES)
    assert event.details["digest"] == forgotten_digest(forget_key(SENTINEL))
    assert event.details["counts"]["records"] == 7
    [kept] = await kstore.list_forgotten(T1)
    assert (kept.scope, kept.length, kept.digest) == (RES, len(forget_key(SENTINEL)), event.details["digest"])
    assert event.subject_id == kept.id

    # The next capture of the value (however it is spelt) is refused as tombstoned, audited
    # without the text; other facts are still captured.
    for text in (f"Jane's badge reads {SENTINEL}", f"pin: {SENTINEL.lower()}", "QZX\u200bKNOW-77 again"):
        outcome = await capture(
            kstore,
            ids["jane"],
            text,
            context=T2,
            proposed_level="thread",
            ceiling="org",
            reason="re-observed",
            actor="capturer",
        )
        assert outcome.status == "refused-tombstoned" and outcome.record is None, text
        assert SENTINEL not in outcome.detail and FORGOTTEN_PLACEHOLDER in outcome.detail
    with pytest.raises(TombstonedValueError) as caught:
        await kstore.create_node(f"Agent {SENTINEL}", "person", T1, actor="capturer", reason="link")
    assert SENTINEL not in str(caught.value)
    refusals = [
        e
        for e in (await kstore.list_activity(T2, limit=1000)).items
        if e.action is ActivityAction.WRITE_REFUSED
    ]
    assert len(refusals) == 3 and all(e.details["refusal"] == "tombstoned" for e in refusals)
    assert scan_knowledge(kstore, SENTINEL) == [] and scan_knowledge(kstore, SENTINEL.lower()) == []
    ok = await capture(
        kstore,
        ids["jane"],
        "Jane likes tea",
        context=T2,
        proposed_level="thread",
        ceiling="org",
        reason="observed",
        actor="capturer",
    )
    assert ok.status == "captured"


async def test_forget_reaches_the_chain_and_subtree_never_a_sibling(kstore: TablesKnowledgeStore) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    org_node = await knowledge.node("Acme", "org", ORG)
    org_fact = await knowledge.append(org_node.id, f"Acme badge {SENTINEL}", ORG, reason="said so")
    thread_fact = await knowledge.append(org_node.id, f"t2 saw {SENTINEL}", T2, reason="said so")
    bob_fact = await knowledge.append(org_node.id, f"Bob saw {SENTINEL}", BOB, reason="said so")

    counts = await forget_value(knowledge, SENTINEL, RES)

    assert counts["records"] == 2
    assert await kstore.load_record(org_fact.id) is None  # what alice reads (her org's)
    assert await kstore.load_record(thread_fact.id) is None  # what lies below her
    assert await kstore.load_record(bob_fact.id) is not None  # a sibling resource is not reached
    # The refusal holds where the value was forgotten and below it, not in the sibling.
    bob_again = await knowledge.append(org_node.id, f"Bob saw {SENTINEL} twice", BOB, reason="said so")
    assert bob_again.scope == BOB
    with pytest.raises(TombstonedValueError):
        await knowledge.append(org_node.id, f"again {SENTINEL}", T1, reason="said so")
    # Forgetting twice is harmless: the same forgotten value, a second audit event.
    again = await forget_value(knowledge, "qzx know 77", RES, reason="asked again")
    assert again["forgotten"] == 0 and len(await kstore.list_forgotten(RES)) == 1


async def test_forget_refuses_a_reason_or_actor_holding_the_value(kstore: TablesKnowledgeStore) -> None:
    with pytest.raises(InvalidInputError, match="reason"):
        await kstore.forget_value(SENTINEL, RES, actor="me", reason=f"forget {SENTINEL}")
    with pytest.raises(InvalidInputError, match="value"):
        await kstore.forget_value("   ", RES, actor="me", reason="why")
    assert (await kstore.list_activity(RES)).items == []


async def test_purge_resource_removes_every_row_of_its_subtree(kstore: TablesKnowledgeStore) -> None:
    resource = f"res-{SENTINEL}"
    res = f"org:acme/resource:{resource}"
    knowledge = Knowledge(kstore, actor="tester")
    org_node = await knowledge.node("Acme", "org", ORG)
    org_fact = await knowledge.append(org_node.id, "Acme is a company", ORG, reason="said so")
    bob = await knowledge.node("Bob", "person", BOB)
    bob_fact = await knowledge.append(bob.id, "Bob works at [[Acme]]", BOB, reason="said so")
    ids = await plant(knowledge, "plain-value", res=res)
    await knowledge.append(ids["jane"], "Jane works at [[Acme]]", f"{res}/thread:t2", reason="said so")
    await knowledge.drain()
    assert scan_knowledge(kstore, SENTINEL)

    counts = await purge_resource(knowledge, "acme", resource, reason="account closed")

    assert scan_knowledge(kstore, SENTINEL) == []
    assert scan_knowledge(kstore, "plain-value") == []
    assert counts["nodes"] == 3 and counts["records"] == 10  # Agent, Jane, Berlin; every record
    assert counts["tombstones"] == 2 and counts["events"] > 10 and counts["vectors"] >= 5
    assert (await kstore.list_nodes(res)).items == [org_node]
    assert await kstore.get_record(org_fact.id, ORG) is not None
    assert await kstore.get_record(bob_fact.id, BOB) is not None
    assert {v.record_id for v in await kstore.list_vectors()} == {org_fact.id, bob_fact.id}
    assert {e.record_id for e in await kstore.list_outbox(include_completed=True)} == {
        org_fact.id,
        bob_fact.id,
    }
    [event] = [
        e
        for e in (await kstore.list_activity(ORG, limit=1000)).items
        if e.action is ActivityAction.SCOPE_PURGED
    ]
    assert (event.scope, event.reason, event.subject_type) == (ORG, "account closed", "scope")
    assert event.subject_id == forgotten_digest(res) and event.details["counts"] == counts
    # Nothing of the resource is left to read; its scope can be used afresh.
    assert all(e.scope == ORG for e in (await kstore.list_activity(f"{res}/thread:t1", limit=1000)).items)
    assert await kstore.list_tombstones(res) == []
    fresh = await knowledge.node("Jane", "person", res)
    assert fresh.id != ids["jane"]


async def test_dump_and_restore_give_the_same_reads(tmp_path: Path, kstore: TablesKnowledgeStore) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    ids = await plant(knowledge, "plain-value")
    await forget_value(knowledge, "codename", RES)
    dump = await kstore.dump_scope(RES)
    assert dump.counts()["records"] >= 8 and dump.forgotten and dump.tombstones
    target = Knowledge(InMemoryKnowledgeStore(), actor="tester")
    written = await target.store.restore_dump(dump, subtree=RES)
    assert written == dump.counts()
    assert await target.store.dump_scope(RES) == dump
    for scope in (RES, T1, T2):
        assert await target.store.list_activity(scope, limit=1000) == await kstore.list_activity(
            scope, limit=1000
        )
        assert await target.store.list_about(ids["jane"], scope, view=ALL) == await kstore.list_about(
            ids["jane"], scope, view=ALL
        )
        assert [(h.id, h.score) for h in await target.search("Jane Berlin", scope)] == [
            (h.id, h.score) for h in await knowledge.search("Jane Berlin", scope)
        ]
    with pytest.raises(ImportConflictError):
        await target.store.restore_dump(dump, subtree=RES)
    # Rows above the subtree that the target already holds identically are kept, not refused.
    org_only = await kstore.dump_scope(ORG)
    assert await target.store.restore_dump(org_only, subtree=BOB) == dict.fromkeys(written, 0)


def test_forgotten_values_match_inside_texts_by_digest_only() -> None:
    stored = [(forgotten_digest(forget_key("Jane Doe")), len(forget_key("Jane Doe")))]
    assert stored[0][0] != forget_key("Jane Doe") and "jane" not in stored[0][0]
    table = {
        "Call Jane Doe tomorrow": True,
        "JANE-DOE said hi": True,
        "jane\u200bdoe": True,
        "Ｊａｎｅ Ｄｏｅ": True,
        "Jane Smith and John Doe": False,
        "": False,
    }
    for text, expected in table.items():
        assert forgotten_in(text, stored) is expected, text
    assert forgotten_in("anything", []) is False


def test_knowledge_scopes_follow_the_threads() -> None:
    threads = [
        Thread(id="t1", resource_id="alice", org_id="acme"),
        Thread(id="t2", resource_id="alice", org_id="beta"),
        Thread(id="t3", resource_id="bob"),
    ]
    assert knowledge_scopes(threads, thread_id="t1") == ["org:acme/resource:alice/thread:t1"]
    assert knowledge_scopes(threads, resource_id="alice") == [
        "org:acme/resource:alice",
        "org:beta/resource:alice",
    ]
    assert knowledge_scopes(threads, default_org=None) == ["org:acme", "org:beta"]
    assert knowledge_scopes(threads) == ["org:acme", "org:beta", "org:default"]
    assert knowledge_scopes(threads, default_org="home") == ["org:acme", "org:beta", "org:home"]
    assert knowledge_scopes([], resource_id="carol", default_org="home") == ["org:home/resource:carol"]
    assert summed([{"records": 2}, {"records": 1, "nodes": 1}]) == {
        "knowledge_records": 3,
        "knowledge_nodes": 1,
    }


async def test_a_tombstone_above_the_forget_keeps_refusing_there(kstore: TablesKnowledgeStore) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    acme = await knowledge.node("Acme", "org", ORG)
    await kstore.add_tombstone(acme.id, ORG, f"Acme owes {SENTINEL}", actor="tester", reason="wrong")
    counts = await forget_value(knowledge, SENTINEL, RES)
    assert counts["tombstones"] == 1 and counts["forgotten"] == 2
    assert {f.scope for f in await kstore.list_forgotten(RES)} == {ORG, RES}
    with pytest.raises(TombstonedValueError):
        await knowledge.append(acme.id, f"Acme owes {SENTINEL}", BOB, reason="again")
    assert scan_knowledge(kstore, SENTINEL) == []


async def test_forget_and_purge_each_write_one_event(kstore: TablesKnowledgeStore) -> None:
    """The conformance vocabulary test's two missing steps (one event per mutation)."""
    act = {"actor": "tester", "reason": "conformance"}
    node = await kstore.create_node("Jane", "person", RES, **act)
    await kstore.append_record(RecordDraft(node.id, "fact", T1), **act)
    await kstore.append_record(RecordDraft(node.id, "other fact", T2), **act)
    writes = {
        ActivityAction.VALUE_FORGOTTEN: lambda: kstore.forget_value("never stored", T1, **act),
        ActivityAction.SCOPE_PURGED: lambda: kstore.purge_scope(T2, **act),
    }
    for expected, write in writes.items():
        before = {e.id for e in (await kstore.list_activity(T1, limit=1000)).items}
        await write()
        new = [e for e in (await kstore.list_activity(T1, limit=1000)).items if e.id not in before]
        assert [e.action for e in new] == [expected]
        assert (new[0].actor, new[0].reason) == ("tester", "conformance")
