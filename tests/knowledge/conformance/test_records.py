"""Records: time axes, ceilings, soft delete and restore, tombstones, trust, atomic rollback."""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import (
    CeilingExceededError,
    CeilingLoweredError,
    KnowledgeNotFoundError,
    TombstonedValueError,
    UnresolvedMentionError,
)
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import NewNodeMention, RecordDraft, RecordView, TrustState
from obsmem.knowledge.store.scopes import Level
from obsmem.knowledge.store.values import parse_when

from .world import ACT, ORG, RES, T1, T2

pytestmark = pytest.mark.anyio


async def test_captured_at_is_stamped_by_the_store_and_when_is_the_callers(
    kstore: TablesKnowledgeStore, clock: FakeClock
) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    clock.advance(90)
    record = await kstore.append_record(
        RecordDraft(jane.id, "Jane started", RES, when=parse_when("2026-07-01")), **ACT
    )
    assert record.captured_at == clock.now()
    assert record.when is not None and record.when.start.isoformat() == "2026-07-01T00:00:00+00:00"
    assert record.metadata["reason"] == "conformance"
    stored = await kstore.get_record(record.id, RES)
    assert stored == record and stored.valid_until is None  # a dated fact stays true until superseded
    bounded = await kstore.append_record(
        RecordDraft(jane.id, "Jane on leave", RES, when=parse_when("2026-08-01/2026-08-14")), **ACT
    )
    stored_bounded = await kstore.get_record(
        bounded.id, RES, RecordView(as_of=parse_when("2026-08-10").start)
    )
    assert stored_bounded is not None and stored_bounded.valid_until == parse_when("2026-08-15T00:00Z").start
    assert await kstore.get_record(bounded.id, RES, RecordView(as_of=parse_when("2026-08-15").start)) is None


async def test_the_ceiling_is_checked_on_append_and_on_every_rescope(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    with pytest.raises(CeilingExceededError):
        await kstore.append_record(RecordDraft(jane.id, "too broad", ORG, max_scope=Level.RESOURCE), **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "private", T1, max_scope=Level.THREAD), **ACT)
    with pytest.raises(CeilingExceededError):
        await kstore.rescope_record(record.id, T1, RES, **ACT)
    resource_capped = await kstore.append_record(
        RecordDraft(jane.id, "r", RES, max_scope=Level.RESOURCE), **ACT
    )
    with pytest.raises(CeilingLoweredError, match="cannot be lowered"):
        await kstore.raise_ceiling(resource_capped.id, RES, Level.THREAD, privileged=True, **ACT)
    raised = await kstore.raise_ceiling(record.id, T1, Level.RESOURCE, privileged=True, **ACT)
    assert raised.max_scope is Level.RESOURCE
    moved = await kstore.rescope_record(record.id, T1, RES, **ACT)
    assert moved.scope == RES
    with pytest.raises(CeilingExceededError):
        await kstore.rescope_record(record.id, T1, ORG, **ACT)
    assert (await kstore.get_record(record.id, T2)) is not None  # now shared with the sibling


async def test_rescope_stays_on_the_actors_chain(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "note", RES), **ACT)
    with pytest.raises(Exception, match="own scope chain"):
        await kstore.rescope_record(record.id, T1, T2, **ACT)
    with pytest.raises(KnowledgeNotFoundError):
        await kstore.rescope_record(
            (await kstore.append_record(RecordDraft(jane.id, "t1 only", T1), **ACT)).id, T2, T2, **ACT
        )


async def test_soft_delete_is_idempotent_and_restore_keeps_mentions(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(
        RecordDraft(jane.id, "Jane drinks [[Tea]]", RES, mentions=[NewNodeMention("Tea", RES)]), **ACT
    )
    tea = await kstore.resolve_node("Tea", RES)
    assert tea is not None
    removed = await kstore.remove_record(record.id, RES, actor="curator", reason="superseded")
    assert removed.deleted_by == "curator" and removed.deleted_at is not None
    assert (await kstore.list_mentioning(tea.id, RES)).items == []
    assert [
        r.id for r in (await kstore.list_mentioning(tea.id, RES, view=RecordView(include_deleted=True))).items
    ] == [record.id]
    outbox_before = len(await kstore.list_outbox(include_completed=True))
    events_before = len((await kstore.list_activity(RES)).items)
    await kstore.remove_record(record.id, RES, **ACT)  # a second removal writes nothing
    assert len(await kstore.list_outbox(include_completed=True)) == outbox_before
    assert len((await kstore.list_activity(RES)).items) == events_before
    restored = await kstore.restore_record(record.id, RES, **ACT)
    assert restored.deleted_at is None
    assert [r.id for r in (await kstore.list_mentioning(tea.id, RES)).items] == [record.id]


async def test_a_tombstoned_value_is_hidden_and_cannot_be_captured_again(
    kstore: TablesKnowledgeStore,
) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "Jane lives in Paris.", RES), **ACT)
    await kstore.remove_record(record.id, RES, tombstone=True, **ACT)
    with pytest.raises(TombstonedValueError, match="tombstoned"):
        # The same value, in a narrower scope.
        await kstore.append_record(RecordDraft(jane.id, "jane  lives in PARIS", T1), **ACT)
    with pytest.raises(TombstonedValueError):
        await kstore.restore_record(record.id, RES, **ACT)  # a deletion with a tombstone sticks
    other = await kstore.append_record(RecordDraft(jane.id, "Jane lives in Rome", RES), **ACT)  # still fine
    assert [r.id for r in (await kstore.list_about(jane.id, T1)).items] == [other.id]
    # A tombstone covers its scope and everything below it, never a broader scope.
    await kstore.add_tombstone(jane.id, T1, "Jane likes jazz", **ACT)
    with pytest.raises(TombstonedValueError):
        await kstore.append_record(RecordDraft(jane.id, "Jane likes jazz", T1), **ACT)
    shared = await kstore.append_record(RecordDraft(jane.id, "Jane likes jazz", RES), **ACT)
    assert shared.id in {r.id for r in (await kstore.list_about(jane.id, T1)).items}
    tombstones = await kstore.list_tombstones(T1)
    assert {t.value for t in tombstones} == {"jane lives in paris", "jane likes jazz"}


async def test_trust_states_and_default_reads(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    candidate = await kstore.append_record(
        RecordDraft(jane.id, "Jane may move", RES, trust=TrustState.CANDIDATE), **ACT
    )
    verified = await kstore.append_record(RecordDraft(jane.id, "Jane is an engineer", RES), **ACT)
    assert [r.id for r in (await kstore.list_about(jane.id, RES)).items] == [verified.id]
    with_candidates = RecordView(include_candidates=True)
    assert [r.id for r in (await kstore.list_about(jane.id, RES, view=with_candidates)).items] == [
        verified.id,
        candidate.id,
    ]
    assert [r.id for r in (await kstore.list_candidates(RES)).items] == [candidate.id]
    approved = await kstore.set_trust(candidate.id, RES, TrustState.VERIFIED, **ACT)
    assert approved.trust is TrustState.VERIFIED
    assert (await kstore.list_candidates(RES)).items == []
    with pytest.raises(Exception, match="only candidates are reviewed"):
        await kstore.set_trust(candidate.id, RES, TrustState.REJECTED, **ACT)
    doubtful = await kstore.append_record(
        RecordDraft(jane.id, "Jane hates tea", RES, trust=TrustState.CANDIDATE), **ACT
    )
    await kstore.set_trust(doubtful.id, RES, TrustState.REJECTED, tombstone=True, **ACT)
    assert doubtful.id not in {
        r.id for r in (await kstore.list_about(jane.id, RES, view=with_candidates)).items
    }
    with pytest.raises(TombstonedValueError):
        await kstore.append_record(
            RecordDraft(jane.id, "Jane hates tea.", RES, trust=TrustState.CANDIDATE), **ACT
        )


async def test_a_failed_resolution_rolls_back_the_whole_write(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    events = (await kstore.list_activity(ORG + "/resource:alice")).items
    outbox = await kstore.list_outbox(include_completed=True)
    with pytest.raises(UnresolvedMentionError):
        await kstore.append_record(
            RecordDraft(
                jane.id,
                "Jane met [[Bob]] about [[Ghost]]",
                RES,
                mentions=[NewNodeMention("Bob", RES), "no-such-node-id"],  # Bob is created before the failure
            ),
            **ACT,
        )
    assert await kstore.resolve_node("Bob", RES) is None
    assert (await kstore.list_about(jane.id, RES, view=RecordView(include_deleted=True))).items == []
    assert (await kstore.list_activity(RES)).items == events
    assert await kstore.list_outbox(include_completed=True) == outbox
    assert [n.name for n in (await kstore.list_nodes(RES)).items] == ["Jane"]


async def test_returned_objects_are_clones(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, metadata={"tags": ["a"]}, **ACT)
    jane.metadata["tags"].append("mutated")
    record = await kstore.append_record(RecordDraft(jane.id, "fact", RES, metadata={"k": [1]}), **ACT)
    record.metadata["k"].append(2)
    assert (await kstore.get_node(jane.id, RES)).metadata == {"tags": ["a"]}  # type: ignore[union-attr]
    assert (await kstore.get_record(record.id, RES)).metadata == {"k": [1], "reason": "conformance"}  # type: ignore[union-attr]


async def test_paging_newest_first_and_by_source_oldest_first(
    kstore: TablesKnowledgeStore, clock: FakeClock
) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    made = []
    for index in range(5):
        clock.advance(1)
        draft = RecordDraft(jane.id, f"fact {index}", RES, source_thread_id="t1")
        made.append((await kstore.append_record(draft, **ACT)).id)
    first = await kstore.list_about(jane.id, RES, limit=2)
    assert [r.id for r in first.items] == made[::-1][:2] and first.next_cursor == made[3]
    second = await kstore.list_about(jane.id, RES, limit=2, after=first.next_cursor)
    assert [r.id for r in second.items] == made[::-1][2:4]
    last = await kstore.list_about(jane.id, RES, limit=2, after=second.next_cursor)
    assert [r.id for r in last.items] == [made[0]] and last.next_cursor is None
    oldest = await kstore.list_by_source("t1", RES, limit=3)
    assert [r.id for r in oldest.items] == made[:3]
    rest = await kstore.list_by_source("t1", RES, limit=3, after=oldest.next_cursor)
    assert [r.id for r in rest.items] == made[3:]
    assert rest.next_cursor is None


async def test_erase_hard_deletes_records_and_their_history(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    draft = RecordDraft(jane.id, "Jane's PIN is QZ-4321", RES, trust=TrustState.CANDIDATE)
    secret = await kstore.append_record(draft, **ACT)
    await kstore.set_trust(secret.id, RES, TrustState.VERIFIED, **ACT)
    kept = await kstore.append_record(RecordDraft(jane.id, "Jane likes tea", RES), **ACT)
    with pytest.raises(KnowledgeNotFoundError):  # another thread's caller may not erase a resource record it cannot see
        await kstore.erase_records([secret.id], "org:acme/resource:bob", **ACT)
    counts = await kstore.erase_records([secret.id, secret.id], RES, **ACT)
    assert counts["records"] == 1 and counts["events"] == 2  # its creation and its trust change
    assert await kstore.load_record(secret.id) is None and await kstore.load_record(kept.id) is not None
    events = (await kstore.list_activity(RES, limit=1000)).items
    about = [e for e in events if e.subject_id == secret.id]
    assert [(e.action, e.details) for e in about] == [("record-deleted", {"erased": True})]
    assert "QZ-4321" not in "".join(e.model_dump_json() for e in events)  # ids and timestamps can hold "4321"
    assert all(e.record_id != secret.id for e in await kstore.list_outbox(include_completed=True))


async def test_candidates_within_a_scope_leave_its_ancestors_out_and_page(kstore: TablesKnowledgeStore) -> None:
    """``within``: the candidates stored at the scope itself, paged by the cursor; many newer ones
    of an ancestor (which a reviewer of the scope does not decide on) never fill its pages."""
    acme = await kstore.create_node("Acme", "org", ORG, **ACT)
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    own = [
        (await kstore.append_record(RecordDraft(jane.id, f"Jane fact {i}", RES, trust=TrustState.CANDIDATE), **ACT)).id
        for i in range(3)
    ]
    for i in range(5):
        await kstore.append_record(RecordDraft(acme.id, f"Acme fact {i}", ORG, trust=TrustState.CANDIDATE), **ACT)
    assert len((await kstore.list_candidates(RES)).items) == 8  # visible: the org's too
    first = await kstore.list_candidates(RES, limit=2, within=True)
    assert [r.id for r in first.items] == own[::-1][:2] and first.next_cursor is not None
    rest = await kstore.list_candidates(RES, after=first.next_cursor, limit=2, within=True)
    assert [r.id for r in rest.items] == own[:1] and rest.next_cursor is None
    assert {r.scope for r in (await kstore.list_candidates(ORG, within=True)).items} == {ORG}
