"""Nodes: idempotent creation, resolution narrow → broad, descriptions, CAS, merges."""

from __future__ import annotations

import pytest

from obsmem.errors import (
    DescriptionTooLongError,
    InvalidMergeError,
    NameConflictError,
)
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import ActivityAction, NewNodeMention, RecordDraft

from .world import ACT, ORG, RES, T1, T2

pytestmark = pytest.mark.anyio


async def test_creation_is_idempotent_by_scope_and_case_insensitive_name(
    kstore: TablesKnowledgeStore,
) -> None:
    first = await kstore.create_node("Jane Doe", "person", RES, metadata={"source": "crm"}, **ACT)
    again = await kstore.create_node("  jane doe ", "person", RES, **ACT)
    assert again == first
    assert first.metadata == {"source": "crm"}
    elsewhere = await kstore.create_node("Jane Doe", "person", T1, **ACT)
    assert elsewhere.id != first.id  # the same name in another scope is another node
    assert [e.action for e in (await kstore.list_activity(T1)).items].count(ActivityAction.NODE_CREATED) == 2


async def test_resolution_goes_narrow_to_broad_and_never_to_a_sibling(kstore: TablesKnowledgeStore) -> None:
    org_level = await kstore.create_node("Deploy", "task", ORG, **ACT)
    thread_level = await kstore.create_node("deploy", "task", T1, **ACT)
    assert await kstore.resolve_node("DEPLOY", T1) == thread_level
    assert await kstore.resolve_node("deploy", T2) == org_level
    assert await kstore.resolve_node("deploy", RES) == org_level
    only_t2 = await kstore.create_node("Hidden", "task", T2, **ACT)
    assert await kstore.resolve_node("hidden", T2) == only_t2
    assert await kstore.resolve_node("hidden", T1) is None


@pytest.mark.parametrize("length", [400, 401])
async def test_description_limit_is_enforced_on_create_and_update(
    kstore: TablesKnowledgeStore, length: int
) -> None:
    text = "d" * length
    if length <= 400:
        node = await kstore.create_node("N", "node", RES, description=text, **ACT)
        assert node.description == text
        updated = await kstore.update_node(node.id, node.version, scope=RES, description="e" * length, **ACT)
        assert updated is not None and updated.description == "e" * length
    else:
        with pytest.raises(DescriptionTooLongError, match="limit is 400"):
            await kstore.create_node("N", "node", RES, description=text, **ACT)
        node = await kstore.create_node("N", "node", RES, **ACT)
        with pytest.raises(DescriptionTooLongError):
            await kstore.update_node(node.id, node.version, scope=RES, description=text, **ACT)


async def test_update_is_compare_and_set_and_description_can_be_cleared(kstore: TablesKnowledgeStore) -> None:
    node = await kstore.create_node("Jane", "person", RES, description="engineer", **ACT)
    updated = await kstore.update_node(
        node.id, 1, scope=RES, content="Works on [[Atlas]]", mentions=[NewNodeMention("Atlas", RES)], **ACT
    )
    assert updated is not None and updated.version == 2 and updated.description == "engineer"
    assert await kstore.update_node(node.id, 1, scope=RES, kind="human", **ACT) is None  # stale
    cleared = await kstore.update_node(node.id, 2, scope=RES, description="", **ACT)
    assert cleared is not None and cleared.description == "" and cleared.version == 3
    atlas = await kstore.resolve_node("atlas", RES)
    assert atlas is not None and updated.mentions == (atlas.id,)
    other = await kstore.create_node("Bob", "person", RES, **ACT)
    with pytest.raises(NameConflictError):
        await kstore.update_node(other.id, other.version, scope=RES, name="JANE", **ACT)


async def test_description_is_searchable(kstore: TablesKnowledgeStore) -> None:
    node = await kstore.create_node("Jane", "person", RES, description="platform engineer", **ACT)
    assert [h.id for h in await kstore.search_lexical("platform", RES)] == [node.id]


async def test_merge_moves_records_and_leaves_a_tombstone_pointer(kstore: TablesKnowledgeStore) -> None:
    target = await kstore.create_node("Jane Doe", "person", RES, **ACT)
    source = await kstore.create_node("J. Doe", "person", RES, description="from chat", **ACT)
    record = await kstore.append_record(RecordDraft(source.id, "J. Doe likes tea", T1), **ACT)
    mention = await kstore.append_record(
        RecordDraft(target.id, "Met [[J. Doe]]", T1, mentions=[source.id]), **ACT
    )
    outbox_before = {e.idempotency_key for e in await kstore.list_outbox(include_completed=True)}
    merged = await kstore.merge_nodes(source.id, target.id, source.version, scope=T1, **ACT)
    assert merged is not None and merged.id == target.id
    assert merged.description == "from chat" and merged.version == target.version + 1  # adopted
    assert await kstore.get_node(source.id, T1) == merged  # reads follow the merge chain
    assert await kstore.resolve_node("j. doe", T1) == merged
    about = {r.id for r in (await kstore.list_about(target.id, T1)).items}
    assert about == {record.id, mention.id}
    assert [r.id for r in (await kstore.list_mentioning(target.id, T1)).items] == [mention.id]
    new_keys = {e.idempotency_key for e in await kstore.list_outbox(include_completed=True)} - outbox_before
    assert f"knowledge:record:{record.id}:upsert:2" in new_keys  # re-indexed under the new node
    assert "node-merged" in [e.action for e in (await kstore.list_activity(T1)).items]
    with pytest.raises(InvalidMergeError, match="already merged"):
        await kstore.merge_nodes(source.id, target.id, source.version + 1, scope=T1, **ACT)


async def test_merge_refuses_self_cycles_stale_versions_and_narrower_targets(
    kstore: TablesKnowledgeStore,
) -> None:
    a = await kstore.create_node("A", "node", RES, **ACT)
    b = await kstore.create_node("B", "node", RES, **ACT)
    narrow = await kstore.create_node("C", "node", T1, **ACT)
    with pytest.raises(InvalidMergeError):
        await kstore.merge_nodes(a.id, a.id, a.version, scope=T1, **ACT)
    with pytest.raises(InvalidMergeError, match="same scope or a broader one"):
        await kstore.merge_nodes(a.id, narrow.id, a.version, scope=T1, **ACT)
    assert await kstore.merge_nodes(a.id, b.id, a.version + 5, scope=T1, **ACT) is None
    assert await kstore.merge_nodes(a.id, b.id, a.version, scope=T1, **ACT) is not None
    with pytest.raises(InvalidMergeError):  # b → a would close a cycle (a's terminal is b)
        await kstore.merge_nodes(b.id, a.id, (await kstore.get_node(b.id, RES)).version, scope=T1, **ACT)  # type: ignore[union-attr]
    with pytest.raises(InvalidMergeError, match="already merged"):
        await kstore.merge_nodes(a.id, b.id, a.version + 1, scope=T1, **ACT)


async def test_description_adoption_matrix(kstore: TablesKnowledgeStore) -> None:
    # Adopted only when the target has none: its own text wins, and so does an explicit clear ("").
    kept_target = await kstore.create_node("T1", "node", RES, description="target's", **ACT)
    source = await kstore.create_node("S1", "node", RES, description="source's", **ACT)
    merged = await kstore.merge_nodes(source.id, kept_target.id, source.version, scope=T1, **ACT)
    assert merged is not None and merged.description == "target's" and merged.version == kept_target.version
    bare_target = await kstore.create_node("T2", "node", RES, **ACT)
    bare_source = await kstore.create_node("S2", "node", RES, **ACT)
    merged = await kstore.merge_nodes(bare_source.id, bare_target.id, bare_source.version, scope=T1, **ACT)
    assert merged is not None and merged.description is None and merged.version == bare_target.version
    cleared = await kstore.create_node("T3", "node", RES, description="old", **ACT)
    cleared = await kstore.update_node(cleared.id, cleared.version, scope=RES, description="", **ACT)  # type: ignore[assignment]
    assert cleared is not None
    third_source = await kstore.create_node("S3", "node", RES, description="source's", **ACT)
    merged = await kstore.merge_nodes(third_source.id, cleared.id, third_source.version, scope=T1, **ACT)
    assert merged is not None and merged.description == ""
    adopting = await kstore.create_node("T4", "node", RES, **ACT)
    fourth_source = await kstore.create_node("S4", "node", RES, description="source's", **ACT)
    merged = await kstore.merge_nodes(fourth_source.id, adopting.id, fourth_source.version, scope=T1, **ACT)
    assert merged is not None and merged.description == "source's" and merged.version == adopting.version + 1


async def test_list_nodes_filters_and_pages_by_name(kstore: TablesKnowledgeStore) -> None:
    for name in ["delta", "Alpha", "charlie", "bravo", "Echo"]:
        await kstore.create_node(name, "person" if name != "Echo" else "place", RES, **ACT)
    page = await kstore.list_nodes(T1, limit=2)
    assert [n.name for n in page.items] == ["Alpha", "bravo"] and page.next_cursor is not None
    page = await kstore.list_nodes(T1, limit=2, after=page.next_cursor)
    assert [n.name for n in page.items] == ["charlie", "delta"]
    page = await kstore.list_nodes(T1, limit=2, after=page.next_cursor)
    assert [n.name for n in page.items] == ["Echo"] and page.next_cursor is None
    assert [n.name for n in (await kstore.list_nodes(T1, kind="place")).items] == ["Echo"]
    assert [n.name for n in (await kstore.list_nodes(T1, name_prefix="B")).items] == ["bravo"]
    with pytest.raises(Exception, match="Invalid node cursor"):
        await kstore.list_nodes(T1, after="not json")
