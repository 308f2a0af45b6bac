"""Capture: committed observation deltas become records, through the store's public operations."""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge, Level, RecordView, TrustState
from obsmem.knowledge.agents import propose, statements
from obsmem.storage import Store
from tests.knowledge.agents.conftest import agents_for, observation

pytestmark = pytest.mark.anyio

ALL = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
DELTA = observation(
    "* 🔴 (08:40) User stated they are Nadia Kessler, they work as a Senior Backend Engineer at Tessera Logistics in Munich.",
    "* 🟡 (08:41) User asked what the weather is like in Munich.",
    "* 🔴 (08:55) User stated they also have a daughter, Ida, who is six years old, and a beagle called Kiwi.",
    "* 🟢 (08:56) Assistant said: Lovely.",
)


def test_rules_read_stated_facts_only_with_their_time_and_attribute() -> None:
    found = statements(DELTA)
    assert [s.text for s in found] == [
        "they are Nadia Kessler, they work as a Senior Backend Engineer at Tessera Logistics in Munich",
        "they also have a daughter, Ida, who is six years old",
        "a beagle called Kiwi",
    ]
    assert found[0].observed_at is not None and found[0].observed_at.isoformat() == "2025-03-03T08:40:00+00:00"
    work = propose(found[0])
    assert [(p.attribute, p.text) for p in work] == [
        (None, "they are Nadia Kessler"),
        ("job title", "works as Senior Backend Engineer"),
        ("employer", "works at [[Tessera Logistics]]"),
        ("work city", "works in [[Munich]]"),
    ]
    assert propose(found[2])[0].attribute == "beagle name"
    correction = statements(observation("* 🔴 (07:48) User stated a small correction first: their dog is called Kiki, not Kiwi."))
    fix = propose(correction[0])[0]
    assert (fix.attribute, fix.replaces) == ("dog name", ("Kiwi",))


async def test_capture_writes_candidates_with_actor_reason_and_time(knowledge: Knowledge, store: Store,
                                                                    clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    run = await agents.capture(DELTA, scope, source_thread_id="t1")
    assert run.status == "ran" and len(run.written) == 6
    for record in run.written:
        assert record.trust is TrustState.CANDIDATE
        assert record.scope == scope.key  # thread level by default
        assert record.max_scope is Level.RESOURCE
        assert record.source_thread_id == "t1"
        assert record.when is not None and record.when.start.year == 2025
        assert record.metadata["reason"].startswith("The user stated it: “")
    events = (await knowledge.store.list_activity(scope.key, limit=100)).items
    created = [e for e in events if e.action is ActivityAction.RECORD_CREATED]
    assert len(created) == 6 and {e.actor for e in created} == {"capture"}
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None and user.scope == scope.at(Level.RESOURCE).key  # one node per resource
    # Candidates never reach a default read before review.
    assert (await knowledge.store.list_about(user.id, scope.key)).items == []


async def test_capture_is_idempotent_and_skips_restatements(knowledge: Knowledge, store: Store,
                                                            clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(DELTA, scope, source_thread_id="t1")
    again = await agents.capture(DELTA, scope, source_thread_id="t1")
    shorter = await agents.capture(
        observation("* 🔴 (09:40) User stated: they are Nadia Kessler; a beagle called Kiwi."), scope,
        source_thread_id="t1",
    )
    assert again.written == [] and again.skipped == 6
    assert shorter.written == []


async def test_tombstoned_value_is_refused_and_the_refusal_audited(knowledge: Knowledge, store: Store,
                                                                   clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    first = await agents.capture(DELTA, scope, source_thread_id="t1")
    kiwi = next(r for r in first.written if "Kiwi" in r.text)
    await knowledge.store.remove_record(kiwi.id, scope.key, actor="alice", reason="do not keep my dog's name",
                                        tombstone=True)
    later = observation("* 🔴 (10:00) User stated: a Beagle called Kiwi!", day="Mar 4, 2025")
    run = await agents.capture(later, scope, source_thread_id="t1")
    assert run.written == [] and run.refused == ["a Beagle called Kiwi!"]
    events = (await knowledge.store.list_activity(scope.key, limit=100)).items
    refusals = [e for e in events if e.action is ActivityAction.WRITE_REFUSED]
    assert len(refusals) == 1 and refusals[0].actor == "capture"
    assert refusals[0].details["refusal"] == "tombstoned"


async def test_capture_under_a_thread_ceiling_never_writes_broader(knowledge: Knowledge, store: Store,
                                                                   clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock, ceiling=Level.THREAD, record_level=Level.ORG,
                        node_level=Level.ORG, trust=TrustState.VERIFIED)
    scope = agents.scope("acme", "alice", "t1")
    run = await agents.capture(DELTA, scope, source_thread_id="t1")
    assert run.written
    for record in run.written:
        assert record.scope == scope.key and record.max_scope is Level.THREAD
        for node_id in (record.node_id, *record.mentions):
            node = await knowledge.store.get_node(node_id, scope.key)
            assert node is not None and node.scope == scope.key
    sibling = agents.scope("acme", "alice", "t2")
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None
    assert await knowledge.store.resolve_node("User", sibling.key) is None
    assert (await knowledge.store.list_about(user.id, sibling.key, view=ALL)).items == []


async def test_named_participants_become_their_own_nodes(knowledge: Knowledge, store: Store,
                                                         clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    delta = observation(
        "* 🔴 (13:56) Ana: works as a nurse at the city hospital in Porto.",
        "* 🟡 (13:57) Ben: asked how long.",
        "* 🔴 (13:58) Topics: hospitals.",
    )
    run = await agents.capture(delta, scope, source_thread_id="t1")
    assert [r.text for r in run.written] == ["works as a nurse at the city hospital in Porto"]
    ana = await knowledge.store.resolve_node("Ana", scope.key)
    assert ana is not None and ana.kind == "person"
    assert {r.node_id for r in run.written} == {ana.id}
    assert await knowledge.store.resolve_node("Ben", scope.key) is None


async def test_capture_pinning_pins_standing_rules_and_reports_what_the_budget_refuses(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    # Trusted captures (a candidate is pinned only once reviewed: tests/knowledge/test_learned_skills_and_pins.py)
    agents = agents_for(knowledge, store, clock, capture_pinning=True, max_pins=1, trust="verified")
    scope = agents.scope("acme", "alice", "t1")
    delta = observation("* 🔴 (09:00) User stated they always want an aisle seat.",
                        "* 🔴 (09:05) User stated they never fly before 7am.")
    run = await agents.capture(delta, scope, source_thread_id="t1")
    pins = await agents.pins.list(scope)
    assert [p.text for p in pins] == ["they always want an aisle seat"]
    assert "Capture-time pin dropped: Pin limit reached (1)" in run.detail
    off = agents_for(knowledge, store, clock)  # capture_pinning off (the default): no pins
    other = off.scope("acme", "bob", "t9")
    await off.capture(delta, other, source_thread_id="t9")
    assert await off.pins.list(other) == []
