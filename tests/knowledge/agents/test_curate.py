"""Curate: duplicates merged, contradictions superseded with a reason (same subject and attribute
only), a fail-closed cursor, count and age triggers, and durable per-lane backoff in the store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge, RecordView, TrustState
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents, Lanes, backoff_delay
from obsmem.knowledge.agents.curate import CurateAgent
from obsmem.storage import Store, open_store
from tests.knowledge.agents.conftest import agents_for, observation

pytestmark = pytest.mark.anyio

ALL = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
LIVE = RecordView(include_candidates=True)

DAY1 = observation(
    "* 🔴 (09:00) User stated their number is +49 151 5550 7720.",
    "* 🔴 (09:05) User stated their personal email is nadia.kessler@mailbox.example.",
    "* 🔴 (09:10) User stated Budget for the whole trip is €2,400, flights included.",
    "* 🔴 (09:15) User stated they have a beagle called Kiwi.",
)
DAY2 = observation(
    "* 🔴 (08:00) User stated their number is now +49 176 5550 3381.",
    "* 🔴 (08:05) User stated they changed their mind, it's now €3,000 instead of the old €2,400.",
    "* 🔴 (08:10) User stated a small correction: their dog is called Kiki, not Kiwi.",
    day="Mar 4, 2025",
)


async def texts(knowledge: Knowledge, scope: Any, view: RecordView) -> list[str]:
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None
    return sorted(r.text for r in (await knowledge.store.list_about(user.id, scope.key, view=view, limit=500)).items)


async def test_contradictions_are_superseded_with_a_reason_bounded_to_subject_and_attribute(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(DAY1, scope, source_thread_id="t1")
    await agents.capture(DAY2, scope, source_thread_id="t1")
    run = await agents.curate(scope, "t1", force=True)
    assert run.status == "ran", run.detail
    live = await texts(knowledge, scope, LIVE)
    assert not any("5550 7720" in t for t in live) and any("5550 3381" in t for t in live)
    assert not any(t.startswith("Budget for the whole trip") for t in live)
    assert "they have a beagle called Kiwi" not in live
    # The email is another attribute: nothing says it changed, so it stays.
    assert "their personal email is nadia.kessler@mailbox.example" in live
    assert len(run.removed) == 3
    for _, reason in run.removed:
        assert reason.startswith("superseded by ")
    events = (await knowledge.store.list_activity(scope.key, limit=200)).items
    deletions = [e for e in events if e.action is ActivityAction.RECORD_DELETED]
    assert len(deletions) == 3 and {e.actor for e in deletions} == {"curate"}
    assert all(e.reason.startswith("superseded by ") for e in deletions)
    # Soft: the superseded values are still there for history.
    assert len(await texts(knowledge, scope, ALL)) == 7


async def test_a_restated_old_value_is_superseded_by_the_newer_one_and_duplicates_merge(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents = agents_for(knowledge, store, clock, trust=TrustState.VERIFIED)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(DAY2, scope, source_thread_id="t1")
    # An old statement read again later (e.g. re-observed) carries its own, older time.
    await agents.capture(DAY1, scope, source_thread_id="t1")
    # The same fact stated twice in other words is held once.
    await agents.capture(observation("* 🔴 (10:00) User stated their new number: +49 176 5550 3381.",
                                     day="Mar 5, 2025"), scope, source_thread_id="t1")
    await agents.curate(scope, "t1", force=True)
    live = await texts(knowledge, scope, LIVE)
    numbers = [t for t in live if "5550" in t]
    assert numbers == ["their number is now +49 176 5550 3381"]


async def test_the_cursor_is_fail_closed(knowledge: Knowledge, store: Store, clock: FakeClock,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(DAY1, scope, source_thread_id="t1")
    worklist = await agents.curator.worklist(scope, "t1", None, 100)
    assert len(worklist) == 4
    original = CurateAgent._curate
    calls: list[str] = []

    async def failing_third(self: CurateAgent, record: Any, context: Any, report: Any) -> None:
        calls.append(record.id)
        if len(calls) == 3:
            raise RuntimeError("model went away")
        await original(self, record, context, report)

    monkeypatch.setattr(CurateAgent, "_curate", failing_third)
    run = await agents.curate(scope, "t1", force=True)
    assert run.status == "ran" and run.cursor == worklist[1].id  # through the last finished record
    state = await agents.lanes.read(CurateAgent.lane("t1"))
    assert state.cursor == worklist[1].id

    async def always_fails(self: CurateAgent, record: Any, context: Any, report: Any) -> None:
        raise RuntimeError("model went away")

    monkeypatch.setattr(CurateAgent, "_curate", always_fails)
    run = await agents.curate(scope, "t1", force=True)
    assert run.status == "failed" and run.cursor is None  # ran, did not advance: a failure
    state = await agents.lanes.read(CurateAgent.lane("t1"))
    assert state.cursor == worklist[1].id and state.failures == 1
    assert state.next_attempt_at == clock.now() + timedelta(seconds=60)


def test_backoff_doubles_from_a_minute_to_an_hour() -> None:
    assert [backoff_delay(n) for n in range(0, 9)] == [0, 60, 120, 240, 480, 960, 1920, 3600, 3600]


async def test_backoff_state_is_durable_and_shared_by_two_processes(tmp_path: Path, clock: FakeClock,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     anyio_backend: str) -> None:
    url = f"sqlite:///{tmp_path / 'main.db'}"
    async with Knowledge.sqlite(tmp_path / "k.db", clock=clock) as knowledge, open_store(url) as one, \
            open_store(url) as two:
        first = KnowledgeAgents(knowledge, one, AgentSettings(curate_after_records=1), clock=clock, owner="p1")
        second = KnowledgeAgents(knowledge, two, AgentSettings(curate_after_records=1), clock=clock, owner="p2")
        scope = first.scope("acme", "alice", "t1")
        await first.capture(DAY1, scope, source_thread_id="t1")

        async def always_fails(self: CurateAgent, record: Any, context: Any, report: Any) -> None:
            raise RuntimeError("model went away")

        original = CurateAgent._curate
        monkeypatch.setattr(CurateAgent, "_curate", always_fails)
        assert (await first.curate_if_due(scope, "t1")).status == "failed"
        # The other process sees the backoff: not due, and its run is skipped without a change.
        assert await second.curator.due(scope, "t1") is None
        assert (await second.curate_if_due(scope, "t1")).status == "skipped"
        clock.advance(61)
        assert (await second.curate_if_due(scope, "t1")).status == "failed"
        state = await second.lanes.read(CurateAgent.lane("t1"))
        assert state.failures == 2 and state.next_attempt_at == clock.now() + timedelta(seconds=120)
        # While one process holds the lane, the other's run is skipped, the state untouched.
        monkeypatch.setattr(CurateAgent, "_curate", original)
        clock.advance(121)
        async with first.lanes.hold(CurateAgent.lane("t1")):
            assert (await second.curate(scope, "t1")).status == "skipped"
        assert (await second.lanes.read(CurateAgent.lane("t1"))).failures == 2
        run = await second.curate(scope, "t1")
        assert run.status == "ran"
        state = await first.lanes.read(CurateAgent.lane("t1"))
        assert state.failures == 0 and state.next_attempt_at is None and state.cursor == run.cursor


async def test_triggers_by_count_and_by_age(knowledge: Knowledge, store: Store, clock: FakeClock) -> None:
    by_count = agents_for(knowledge, store, clock, curate_after_records=5, curate_max_age_s=None)
    scope = by_count.scope("acme", "alice", "t1")
    await by_count.capture(DAY1, scope, source_thread_id="t1")  # 4 records
    assert (await by_count.curate_if_due(scope, "t1")).status == "skipped"
    clock.advance(10 * 3600)
    assert (await by_count.curate_if_due(scope, "t1")).status == "skipped"  # no age trigger
    await by_count.capture(DAY2, scope, source_thread_id="t1")
    assert (await by_count.curate_if_due(scope, "t1")).status == "ran"

    by_age = agents_for(knowledge, store, clock, curate_after_records=0, curate_max_age_s=600)
    other = by_age.scope("acme", "alice", "t2")
    await by_age.capture(DAY1, other, source_thread_id="t2")
    assert (await by_age.curate_if_due(other, "t2")).status == "skipped"
    clock.advance(599)
    assert (await by_age.curate_if_due(other, "t2")).status == "skipped"
    clock.advance(1)
    assert (await by_age.curate_if_due(other, "t2")).status == "ran"
    # Nothing uncurated: the age alone never fires.
    clock.advance(3600)
    assert (await by_age.curate_if_due(other, "t2")).status == "skipped"


async def test_curation_maintains_the_capture_guidance_node(knowledge: Knowledge, store: Store,
                                                            clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(DAY1, scope, source_thread_id="t1")
    await agents.curate(scope, "t1", force=True)
    guidance = await knowledge.store.resolve_node("capture-guidance", scope.key)
    assert guidance is not None and guidance.content is not None
    assert "phone number" in guidance.content and len(guidance.content) <= 4000


async def test_duplicates_written_by_other_writers_are_merged(knowledge: Knowledge, store: Store,
                                                              clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    user = await knowledge.node("User", "person", scope.at("resource").key)
    first = await knowledge.append(user.id, "Nadia is vegetarian", scope.key, reason="said", source_thread_id="t1")
    clock.advance(1)
    again = await knowledge.append(user.id, "nadia is VEGETARIAN.", scope.key, reason="said", source_thread_id="t1")
    other = await knowledge.append(user.id, "Nadia is allergic to peanuts", scope.key, reason="said",
                                   source_thread_id="t1")
    run = await agents.curate(scope, "t1", force=True)
    assert run.removed == [(again.id, f"duplicate of {first.id}: the same fact stated again")]
    live = {r.id for r in (await knowledge.store.list_about(user.id, scope.key)).items}
    assert live == {first.id, other.id}


async def test_the_capture_guidance_names_no_attribute_of_a_thread_private_record(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    """An attribute only a thread-private record uses (``max_scope="thread"``) is the record's own
    word and stays out of the guidance; the attributes of the thread's records are listed in a node
    of the thread (the resource's node lists only what the whole resource stores, so a sibling
    thread never reads them); and an org-level guidance node is never rewritten with one
    resource's attributes."""
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(DAY1, scope, source_thread_id="t1")
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None
    await knowledge.append(user.id, "takes zx-secret pills", scope.key, reason="private", max_scope="thread",
                           attribute="zx secret medication", source_thread_id="t1")
    await agents.curate(scope, "t1", force=True)
    guidance = await knowledge.store.resolve_node("capture-guidance", scope.key)
    assert guidance is not None and guidance.content is not None
    assert "phone number" in guidance.content
    assert "zx" not in guidance.content, guidance.content
    assert guidance.scope == scope.key
    assert await knowledge.store.resolve_node("capture-guidance", agents.scope("acme", "alice", "t2").key) is None

    # Bob's resource in the same org, with an org-level guidance node the org wrote.
    org_node = await knowledge.node("capture-guidance", "document", "org:acme", content="The org's guidance.")
    bob = agents.scope("acme", "bob", "b1")
    await agents.capture(DAY1, bob, source_thread_id="b1")
    await agents.curate(bob, "b1", force=True)
    assert (await knowledge.store.load_node(org_node.id)).content == "The org's guidance."  # type: ignore[union-attr]
