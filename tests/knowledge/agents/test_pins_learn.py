"""Pins within a token budget (overflow reported), and learn (a skill only with two supports)."""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import InvalidInputError
from obsmem.knowledge import ActivityAction, Knowledge, Level, RecordView
from obsmem.knowledge.agents import AgentSettings, PinBoard, evidence_id
from obsmem.knowledge.store.scopes import Scope
from obsmem.storage import Store
from tests.knowledge.agents.conftest import agents_for, observation

pytestmark = pytest.mark.anyio

T1 = Scope("acme", "alice", "t1")
T2 = Scope("acme", "alice", "t2")


def words(text: str) -> int:
    return len(text.split())


async def test_pins_fit_the_budget_and_what_does_not_fit_is_reported(knowledge: Knowledge, clock: FakeClock) -> None:
    board = PinBoard(knowledge.store, AgentSettings(pins_tokens=30, max_pins=4), words)
    first = await board.pin("Always answer in German.", T1)
    second = await board.pin("The user is allergic to peanuts, never suggest them.", T1, level=Level.THREAD)
    third = await board.pin("A long pin " + "word " * 20, T1)
    block = await board.render(T1)
    assert block.shown == (first.id, second.id) and block.dropped == (third.id,)
    assert third.id in block.text and "did not fit the 30-token pin budget" in block.text
    # Pins are scoped like records: the thread-level pin is not the sibling's.
    sibling = await board.render(T2)
    assert second.id not in sibling.text and first.id in sibling.text
    await board.pin("four", T1)
    with pytest.raises(InvalidInputError, match="Pin limit reached"):
        await board.pin("five", T1)
    await board.unpin(third.id, T1, actor="alice", reason="not needed")
    assert (await board.render(T1)).dropped == ()
    events = (await knowledge.store.list_activity(T1.key, limit=50)).items
    assert any(e.action is ActivityAction.RECORD_DELETED and e.actor == "alice" for e in events)


async def test_pins_respect_a_thread_ceiling(knowledge: Knowledge, clock: FakeClock) -> None:
    board = PinBoard(knowledge.store, AgentSettings(ceiling=Level.THREAD), words)
    pin = await board.pin("Only here", T1, level=Level.RESOURCE)
    assert pin.scope == T1.key and pin.max_scope is Level.THREAD
    assert (await board.render(T2)).text == ""


PROCEDURE = observation(
    "* 🔴 (09:00) User stated they always book an aisle seat when flying with Ida.",
    "* 🔴 (09:30) User stated the weather is nice.",
)
SECOND = observation(
    "* 🔴 (11:00) User stated when flying, always book the aisle seat next to Ida.", day="Mar 5, 2025"
)


async def approve_pending(knowledge: Knowledge, scope: str) -> None:
    for record in (await knowledge.review.pending(scope)).items:
        await knowledge.review.approve(record.id, scope, reason="true")


async def test_learn_needs_two_distinct_supports_and_is_idempotent(knowledge: Knowledge, store: Store,
                                                                   clock: FakeClock) -> None:
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    # A skill is learned from approved records only (a candidate pending review is no support):
    # each capture's candidates are approved before learn reads them.
    await agents.capture(PROCEDURE, scope, source_thread_id="t1")
    await approve_pending(knowledge, scope.key)
    one = await agents.learn(scope, "t1")
    assert one.written == [] and (await knowledge.store.list_nodes(scope.key, kind="skill")).items == []
    await agents.capture(SECOND, scope, source_thread_id="t1")
    await approve_pending(knowledge, scope.key)
    two = await agents.learn(scope, "t1")
    assert len(two.written) == 2
    skills = (await knowledge.store.list_nodes(scope.key, kind="skill")).items
    assert len(skills) == 1
    sources = sorted(r.metadata["evidence"] for r in two.written)
    assert sorted(r.id for r in two.written) == sorted(evidence_id(skills[0].name, s) for s in sources)
    for record in two.written:
        assert record.id[:10] == record.metadata["evidence"][:10]
        assert f"Evidence source: {record.metadata['evidence']}." in record.text
    # Idempotent: a re-run (cursor reset, say by another process) writes nothing twice.
    await agents.lanes.write(agents.learner.lane("t1"), (await agents.lanes.read(agents.learner.lane("t1"))).succeeded(None, clock.now()))
    again = await agents.learn(scope, "t1")
    assert again.written == []
    evidence = (await knowledge.store.list_about(skills[0].id, scope.key,
                                                 view=RecordView(include_candidates=True))).items
    assert len(evidence) == 2


async def test_a_skill_learned_from_thread_private_records_stays_in_their_thread(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    """Found by a hostile review: two records an application wrote with ``max_scope="thread"``
    became a resource-level skill node whose name and content were their text, readable from
    every other thread of the user. A skill goes no broader than its narrowest support."""
    user = await knowledge.node("User", "person", "org:acme/resource:alice")
    for text in ("I always take my ZX-secret medication pills before breakfast",
                 "I always swallow ZX-secret medication pills early, before coffee"):
        await knowledge.append(user.id, text, T1.key, reason="private to this thread", max_scope="thread",
                               source_thread_id="t1")
    agents = agents_for(knowledge, store, clock)
    report = await agents.learn(T1, "t1")
    assert len(report.written) == 2, report
    skills = (await knowledge.store.list_nodes(T1.key, kind="skill")).items
    assert len(skills) == 1 and skills[0].scope == T1.key
    from_sibling = (await knowledge.store.list_nodes(T2.key)).items
    assert not [n for n in from_sibling if "zx" in (n.content or "").lower() or "zx" in n.name.lower()]
