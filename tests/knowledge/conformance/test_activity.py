"""The audit log: exactly one event per mutation, closed vocabulary, actor and reason, paging."""

from __future__ import annotations

from collections.abc import Awaitable

import pytest

from obsmem.errors import CeilingExceededError, InvalidInputError, KnowledgeNotFoundError, ObsmemError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import ActivityAction, NewNodeMention, RecordDraft, TrustState
from obsmem.knowledge.store.scopes import Level

from .world import ACT, RES, T1, T2

pytestmark = pytest.mark.anyio


async def _events(store: TablesKnowledgeStore) -> list[str]:
    return [e.id for e in (await store.list_activity(T1, limit=1000)).items]


async def test_every_mutation_writes_exactly_one_event_from_the_vocabulary(
    kstore: TablesKnowledgeStore,
) -> None:
    seen: list[ActivityAction] = []

    async def step(expected: ActivityAction, action: object) -> None:
        before = await _events(kstore)
        await action  # type: ignore[misc]
        after = (await kstore.list_activity(T1, limit=1000)).items
        new = [e for e in after if e.id not in before]
        assert [e.action for e in new] == [expected]
        assert new[0].actor == "tester" and new[0].reason == "conformance"
        seen.append(expected)

    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    bob = await kstore.create_node("Bob", "person", RES, **ACT)
    await step(ActivityAction.NODE_CREATED, kstore.create_node("Ann", "person", T1, **ACT))
    await step(ActivityAction.NODE_UPDATED, kstore.update_node(jane.id, 1, scope=RES, kind="human", **ACT))
    await step(ActivityAction.NODE_MERGED, kstore.merge_nodes(bob.id, jane.id, 1, scope=RES, **ACT))
    record = await kstore.append_record(RecordDraft(jane.id, "fact", T1, max_scope=Level.THREAD), **ACT)
    await step(
        ActivityAction.RECORD_CREATED,
        kstore.append_record(
            RecordDraft(jane.id, "met [[Zed]]", T1, mentions=[NewNodeMention("Zed", RES)]), **ACT
        ),
    )
    await step(ActivityAction.RECORD_DELETED, kstore.remove_record(record.id, T1, **ACT))
    await step(ActivityAction.RECORD_RESTORED, kstore.restore_record(record.id, T1, **ACT))
    await step(
        ActivityAction.RECORD_RESCOPED,
        kstore.raise_ceiling(record.id, T1, Level.RESOURCE, privileged=True, **ACT),
    )
    await step(ActivityAction.RECORD_RESCOPED, kstore.rescope_record(record.id, T1, RES, **ACT))
    cand = await kstore.append_record(RecordDraft(jane.id, "maybe", T1, trust=TrustState.CANDIDATE), **ACT)
    await step(ActivityAction.RECORD_VERIFIED, kstore.set_trust(cand.id, T1, TrustState.VERIFIED, **ACT))
    cand2 = await kstore.append_record(
        RecordDraft(jane.id, "maybe not", T1, trust=TrustState.CANDIDATE), **ACT
    )
    await step(
        ActivityAction.RECORD_REJECTED,
        kstore.set_trust(cand2.id, T1, TrustState.REJECTED, tombstone=True, **ACT),
    )
    await step(ActivityAction.TOMBSTONE_CREATED, kstore.add_tombstone(jane.id, T1, "wrong", **ACT))
    await step(
        ActivityAction.WRITE_REFUSED,
        _refused(kstore.append_record(RecordDraft(jane.id, "Wrong!", T1), **ACT)),
    )
    await step(ActivityAction.VALUE_FORGOTTEN, kstore.forget_value("never stored", T1, **ACT))
    await step(ActivityAction.SCOPE_PURGED, kstore.purge_scope(T2, **ACT))
    assert set(seen) | {ActivityAction.RECORD_CREATED} == set(ActivityAction)


async def _refused(write: Awaitable[object]) -> None:
    with pytest.raises(ObsmemError):
        await write


async def test_a_refused_write_rolls_back_and_logs_one_write_refused_event(
    kstore: TablesKnowledgeStore,
) -> None:
    private = await kstore.create_node("Plan", "project", T2, **ACT)
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "fact", T1, max_scope=Level.THREAD), **ACT)
    outbox = await kstore.list_outbox(include_completed=True)
    with pytest.raises(KnowledgeNotFoundError):
        await kstore.append_record(
            RecordDraft(private.id, "see [[New]]", T1, mentions=[NewNodeMention("New", T1)]), **ACT
        )
    with pytest.raises(CeilingExceededError, match="privileged"):
        await kstore.raise_ceiling(record.id, T1, Level.ORG, **ACT)
    assert await kstore.resolve_node("new", T1) is None  # the link's node rolled back with the write
    assert await kstore.list_outbox(include_completed=True) == outbox
    refused = [e for e in (await kstore.list_activity(T1)).items if e.action is ActivityAction.WRITE_REFUSED]
    assert [(e.details["operation"], e.details["refusal"], e.subject_id) for e in refused] == [
        ("raise_ceiling", "privilege", record.id),
        ("append_record", "not-visible", private.id),
    ]
    assert all(e.scope == T1 and e.actor == "tester" and e.reason == "conformance" for e in refused)
    assert not [e for e in (await kstore.list_activity(T2)).items if e.action is ActivityAction.WRITE_REFUSED]


async def test_auto_created_nodes_are_listed_in_the_writing_event(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    await kstore.append_record(
        RecordDraft(jane.id, "met [[Zed]]", T1, mentions=[NewNodeMention("Zed", RES)]), **ACT
    )
    zed = await kstore.resolve_node("zed", T1)
    newest = (await kstore.list_activity(T1, limit=1)).items[0]
    assert (
        zed is not None and newest.action == "record-created" and newest.details["created_nodes"] == [zed.id]
    )


async def test_a_mutation_needs_an_actor_and_a_reason(kstore: TablesKnowledgeStore) -> None:
    with pytest.raises(InvalidInputError, match="actor"):
        await kstore.create_node("Jane", "person", RES, actor=" ", reason="x")
    with pytest.raises(InvalidInputError, match="reason"):
        await kstore.create_node("Jane", "person", RES, actor="me", reason="")
    assert (await kstore.list_nodes(RES)).items == []  # rolled back with the missing event


async def test_activity_pages_newest_first(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    for index in range(4):
        await kstore.append_record(RecordDraft(jane.id, f"fact {index}", T1), **ACT)
    everything = [e.id for e in (await kstore.list_activity(T1)).items]
    assert everything == sorted(everything, reverse=True) and len(everything) == 5
    page = await kstore.list_activity(T1, limit=2)
    assert [e.id for e in page.items] == everything[:2]
    page = await kstore.list_activity(T1, limit=2, after=page.next_cursor)
    assert [e.id for e in page.items] == everything[2:4]
    page = await kstore.list_activity(T1, limit=2, after=page.next_cursor)
    assert [e.id for e in page.items] == everything[4:] and page.next_cursor is None
