"""Curation rules beyond exact duplicates: category supersession (a drink habit, a work city),
stale plans marked done, near-duplicate merges; and a remind agent that speaks only on a
specific match and does not repeat itself. Each rule has its negative on the same fixture."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge, RecordView, TrustState
from obsmem.knowledge.agents import AgentSettings, RemindAgent
from obsmem.knowledge.agents.extract import Statement, propose
from obsmem.storage import Store
from tests.knowledge.agents.conftest import agents_for, observation

pytestmark = pytest.mark.anyio

LIVE = RecordView(include_candidates=True)


async def live_texts(knowledge: Knowledge, scope: Any) -> list[str]:
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None
    return sorted(r.text for r in (await knowledge.store.list_about(user.id, scope.key, view=LIVE, limit=500)).items)


async def deletions(knowledge: Knowledge, scope: Any) -> dict[str, str]:
    """Deleted record text's id → the audited reason (actor checked: always curate)."""
    events = (await knowledge.store.list_activity(scope.key, limit=500)).items
    found = {}
    for event in events:
        if event.action is ActivityAction.RECORD_DELETED:
            assert event.actor == "curate"
            found[event.subject_id] = event.reason
    return found


def test_category_attributes_and_their_values() -> None:
    def first(text: str) -> tuple[str | None, str | None]:
        proposal = propose(Statement(text, None))[-1]
        return proposal.attribute, proposal.value

    assert first("their fuel is coffee, about four flat whites a day") == ("daily drink", "coffee")
    assert first("they switched to green tea this morning") == ("daily drink", "green tea")
    assert first("tomorrow is their first day at the Berlin office") == ("work city", "berlin")
    assert first("they will lead the platform work from Berlin") == ("work city", "berlin")
    assert first("they work as Senior Backend Engineer at Tessera in Munich") == ("work city", "munich")
    # Someone else's office, and a machine that makes coffee, are not the user's categories.
    assert first("Priya works in the Berlin office, they will pair with her")[0] is None
    assert first("the office coffee machine is a beautiful Italian monster")[0] == "office coffee machine"


async def test_a_changed_category_value_supersedes_the_old_one_and_nothing_else(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents = agents_for(knowledge, store, clock, trust=TrustState.VERIFIED)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(observation(
        "* 🔴 (09:00) User stated they work as Senior Backend Engineer at Tessera in Munich.",
        "* 🔴 (09:05) User stated their fuel is coffee, about four flat whites a day.",
        "* 🔴 (09:10) User stated the office coffee machine is a beautiful Italian monster.",
    ), scope, source_thread_id="t1")
    await agents.capture(observation(
        "* 🔴 (08:00) User stated they switched to green tea this morning.",
        "* 🔴 (08:05) User stated Priya works in the Berlin office, they will pair with her.",
        day="Mar 5, 2025",
    ), scope, source_thread_id="t1")
    await agents.curate(scope, "t1", force=True)
    live = await live_texts(knowledge, scope)
    assert "they switched to green tea this morning" in live
    assert not any(t.startswith("their fuel is coffee") for t in live)
    # Priya's office says nothing about the user's work city; the machine is another attribute.
    assert "works in [[Munich]]" in live
    assert "the office coffee machine is a beautiful Italian monster" in live
    reasons = list((await deletions(knowledge, scope)).values())
    assert len(reasons) == 1 and reasons[0].startswith("superseded by ") and "'daily drink' changed" in reasons[0]

    # The user's own new office moves the work city; a second statement of the same city is not
    # removed (same value, not a change: the store's timeline shows the newer statement).
    await agents.capture(observation(
        "* 🔴 (18:00) User stated they will lead the platform work from Berlin.",
        "* 🔴 (18:05) User stated tomorrow is their first day at the Berlin office.",
        day="Mar 9, 2025",
    ), scope, source_thread_id="t1")
    await agents.curate(scope, "t1", force=True)
    live = await live_texts(knowledge, scope)
    assert "works in [[Munich]]" not in live
    assert "tomorrow is their first day at the Berlin office" in live
    reasons = list((await deletions(knowledge, scope)).values())
    assert len(reasons) == 2 and any("'work city' changed from “works in [[Munich]]”" in r for r in reasons)
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None
    history = (await knowledge.store.list_about(user.id, scope.key, view=RecordView(
        include_candidates=True, include_deleted=True, include_superseded=True), limit=50)).items
    lead = [r for r in history if r.text == "they will lead the platform work from Berlin"]
    assert len(lead) == 1 and lead[0].deleted_at is None


async def test_a_plan_marked_done_is_removed_as_stale_and_other_records_stay(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents = agents_for(knowledge, store, clock, trust=TrustState.VERIFIED)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(observation(
        "* 🔴 (09:00) User stated they need to do the Anmeldung at the Bürgeramt next week.",
        "* 🔴 (09:05) User stated they will fill in the Steuer-ID form tomorrow.",
        "* 🔴 (09:10) User stated the Bürgeramt Friedrichshain is near their flat.",
    ), scope, source_thread_id="t1")
    await agents.capture(observation(
        "* 🔴 (10:00) User stated the Anmeldung at the Bürgeramt is done.",
        "* 🔴 (10:05) User stated they have not finished the Steuer-ID form yet.",
        day="Mar 12, 2025",
    ), scope, source_thread_id="t1")
    run = await agents.curate(scope, "t1", force=True)
    live = await live_texts(knowledge, scope)
    assert "they need to do the Anmeldung at the Bürgeramt next week" not in live
    assert "the Anmeldung at the Bürgeramt is done" in live
    # Not done yet: the plan stands. A plain fact sharing the words is no plan: it stays.
    assert "they will fill in the Steuer-ID form tomorrow" in live
    assert "the Bürgeramt Friedrichshain is near their flat" in live
    reasons = await deletions(knowledge, scope)
    assert len(reasons) == 1
    (reason,) = reasons.values()
    assert reason.startswith("stale: ") and "says it is done" in reason and "(stated 2025-03-12)" in reason
    assert [why for _, why in run.removed] == [reason]
    # Soft: the stale record is still there for history.
    user = await knowledge.store.resolve_node("User", scope.key)
    assert user is not None
    every = (await knowledge.store.list_about(user.id, scope.key, view=RecordView(
        include_candidates=True, include_deleted=True, include_superseded=True), limit=50)).items
    assert any(r.text.startswith("they need to do the Anmeldung") and r.deleted_at is not None for r in every)


async def test_near_duplicates_merge_into_the_fuller_record_but_numbers_and_negations_differ(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents = agents_for(knowledge, store, clock, trust=TrustState.VERIFIED)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(observation(
        "* 🔴 (09:00) User stated Ida's trial day at Kita Sonnenhof was postponed by the director.",
        "* 🔴 (09:05) User stated the director of Kita Sonnenhof postponed the trial because of the flu.",
        "* 🔴 (09:07) User stated they went to a pottery class last week.",
        "* 🔴 (09:08) User stated they made a bowl in the pottery class.",
        "* 🔴 (09:10) User stated they rehearse with 16 dancers from the studio after work on Mondays.",
        "* 🔴 (09:15) User stated 18 dancers from the studio rehearse.",
        "* 🔴 (09:20) User stated Ida likes the swimming lessons at the pool.",
        "* 🔴 (09:25) User stated Ida doesn't like the swimming lessons at the pool.",
    ), scope, source_thread_id="t1")
    run = await agents.curate(scope, "t1", force=True)
    live = await live_texts(knowledge, scope)
    assert sum("Kita Sonnenhof" in t for t in live) == 1
    # Two words in common ("pottery class") are not the same fact; nor are different numbers, or a
    # negation on one side only.
    assert sum("pottery class" in t for t in live) == 2
    assert sum("dancers from the studio" in t for t in live) == 2
    assert sum("swimming lessons" in t for t in live) == 2
    assert len(run.removed) == 1 and run.removed[0][1].startswith("duplicate of ")
    assert "a near-duplicate of the same fact" in run.removed[0][1]


async def remind_fixture(knowledge: Knowledge, scope: Any) -> dict[str, str]:
    node = await knowledge.node("User", "person", scope.key)
    ids = {}
    for name, text in [
        ("job", "their partner Tomás starts his new job in Berlin on April 1st"),
        ("architect", "Tomás is an architect at a studio in Berlin"),
        ("window", "Tomás likes the window seat on flights to Berlin"),
        ("movers", "the movers are Brandt Umzüge, booked for both days"),
        ("phone", "their number is now +49 176 5550 3381"),
    ]:
        record = await knowledge.append(node.id, text, scope.key, reason="fixture",
                                        attribute="phone number" if name == "phone" else None)
        ids[name] = record.id
    return ids


async def test_remind_needs_a_specific_match_and_does_not_repeat_itself(
    knowledge: Knowledge, clock: FakeClock
) -> None:
    from obsmem.knowledge.store.scopes import Scope

    scope = Scope("acme", "alice", "t1")
    ids = await remind_fixture(knowledge, scope)
    agent = RemindAgent(knowledge, AgentSettings(remind_limit=3, remind_tokens=400), lambda t: len(t.split()))
    # Only the conversation's hub words ("Tomás", "Berlin") and everyday words in common: silence.
    assert (await agent.remind("Tomás sent me a photo from Berlin this morning", scope)).sources == ()
    # A rare name in common: the reminder speaks (positive control on the same fixture).
    movers = await agent.remind("Please email Brandt Umzüge about the piano", scope)
    assert movers.sources == (ids["movers"],)
    # The same request again (a context rebuilt within the turn) gets the same reminder ...
    assert (await agent.remind("Please email Brandt Umzüge about the piano", scope)).sources == (ids["movers"],)
    # ... the next turns do not repeat it ...
    assert (await agent.remind("Did Brandt Umzüge answer about the piano?", scope)).sources == ()
    # ... a match on the record's attribute speaks ...
    phone = await agent.remind("what is my phone number again?", scope)
    assert phone.sources == (ids["phone"],)
    # ... another thread has its own memory of what it was shown ...
    other = Scope("acme", "alice", "t2")
    assert (await agent.remind("Did Brandt Umzüge answer about the piano?", other)).sources == ()  # t1's record
    # ... and after five other turns the movers are worth a reminder again.
    for question in ["one", "two", "three", "four", "five"]:
        await agent.remind(f"unrelated question {question} about the weather", scope)
    assert (await agent.remind("Did Brandt Umzüge answer about the piano?", scope)).sources == (ids["movers"],)


def test_statements_read_a_speakers_day_line_with_or_without_a_clock_time() -> None:
    """The offline observer writes one line per named speaker and day, without a clock time
    ("* 🔴 Ana: …; …"); older records carry one. Both give the speaker's clauses, dated by the
    day header (main read only the timed form: a new record captured nothing)."""
    from obsmem.knowledge.agents.extract import statements

    text = (
        "Date: Jun 16, 2025\n"
        "* 🔴 Ana: works as a nurse at the Lisbon clinic; adopted a cat called Miso.\n"
        "* 🔴 (13:56) Ben: moved to Porto last spring.\n"
    )
    found = statements(text)
    assert [(s.subject, s.text) for s in found] == [
        ("Ana", "works as a nurse at the Lisbon clinic"),
        ("Ana", "adopted a cat called Miso"),
        ("Ben", "moved to Porto last spring"),
    ]
    assert [s.observed_at.isoformat() if s.observed_at else None for s in found] == [
        "2025-06-16T00:00:00+00:00", "2025-06-16T00:00:00+00:00", "2025-06-16T13:56:00+00:00",
    ]
