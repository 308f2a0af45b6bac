"""The Knowledge facade: wikilinks, capture clamping, review queue, fused search over the index."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import InvalidWhenError, UnresolvedMentionError
from obsmem.knowledge import Knowledge, RecordDraft, RecordView, TrustState, reciprocal_rank_fusion
from obsmem.knowledge.store.scopes import Level

pytestmark = pytest.mark.anyio

ORG = "org:acme"
RES = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
T2 = "org:acme/resource:alice/thread:t2"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Knowledge]:
    clock = FakeClock()
    embedder = LexicalHashEmbedder(64)
    if request.param == "memory":
        facade = Knowledge.in_memory(embedder=embedder, actor="reviewer", clock=clock)
    else:
        facade = Knowledge.sqlite(tmp_path / "k.db", embedder=embedder, actor="reviewer", clock=clock)
    async with facade:
        yield facade


async def test_wikilinks_resolve_narrow_to_broad_and_create_the_missing(knowledge: Knowledge) -> None:
    shared = await knowledge.node("Atlas", "project", RES)
    private = await knowledge.node("Atlas", "project", T2)  # a sibling's node of the same name
    jane = await knowledge.node("Jane", "person", RES)
    record = await knowledge.append(jane.id, "Jane leads [[atlas]] with [[Bob]]", T1, reason="chat")
    bob = await knowledge.store.resolve_node("bob", T1)
    assert bob is not None and bob.scope == T1  # created in the default (record) scope
    assert record.mentions == (shared.id, bob.id)
    assert private.id not in record.mentions
    assert [r.id for r in (await knowledge.store.list_mentioning(shared.id, T1)).items] == [record.id]


async def test_a_link_without_a_resolution_scope_fails_and_writes_nothing(knowledge: Knowledge) -> None:
    from obsmem.knowledge import resolve_mentions

    with pytest.raises(UnresolvedMentionError):
        await resolve_mentions(knowledge.store, "see [[Nowhere]]", None, None)
    with pytest.raises(Exception, match="not on the chain"):
        await resolve_mentions(knowledge.store, "see [[Nowhere]]", T1, T2)
    assert await knowledge.store.resolve_node("Nowhere", T1) is None


async def test_unparseable_when_is_refused_not_dropped(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    with pytest.raises(InvalidWhenError):
        await knowledge.append(jane.id, "Jane joined", RES, reason="chat", when="sometime last spring")
    assert (await knowledge.store.list_about(jane.id, RES)).items == []


async def test_capture_clamps_to_the_ceiling_instead_of_refusing(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    outcome = await knowledge.capture(
        jane.id, "Jane prefers tea", context=T1, proposed_level="org", ceiling="thread", reason="observed"
    )
    assert outcome.status == "captured" and outcome.clamped and outcome.scope == T1
    assert outcome.record is not None and outcome.record.max_scope is Level.THREAD
    assert outcome.record.trust is TrustState.CANDIDATE
    kept = await knowledge.capture(
        jane.id,
        "Jane works remotely",
        context=T1,
        proposed_level="resource",
        ceiling="org",
        reason="observed",
        when="2026-07",
    )
    assert kept.scope == RES and not kept.clamped


async def test_capture_of_a_tombstoned_value_is_refused_and_logged(
    knowledge: Knowledge, caplog: pytest.LogCaptureFixture
) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    first = await knowledge.capture(
        jane.id, "Jane hates tea", context=T1, proposed_level="thread", ceiling="thread", reason="observed"
    )
    assert first.record is not None
    await knowledge.review.reject(first.record.id, T1, reason="user said no", tombstone=True)
    with caplog.at_level(logging.INFO, logger="obsmem.knowledge"):
        again = await knowledge.capture(
            jane.id,
            "jane hates tea!",
            context=T1,
            proposed_level="thread",
            ceiling="thread",
            reason="observed again",
        )
    assert again.status == "refused-tombstoned" and again.record is None
    assert "tombstoned" in caplog.text
    view = RecordView(include_candidates=True, include_deleted=False)
    assert (await knowledge.store.list_about(jane.id, T1, view=view)).items == []


async def test_review_queue_approve_reject_edit(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    a = await knowledge.append(jane.id, "Jane owns the pager", RES, reason="c", trust=TrustState.CANDIDATE)
    b = await knowledge.append(jane.id, "Jane is in Lisbon", RES, reason="c", trust=TrustState.CANDIDATE)
    c = await knowledge.append(jane.id, "Jane likes jazz", T1, reason="c", trust=TrustState.CANDIDATE)
    assert [r.id for r in (await knowledge.review.pending(RES)).items] == [b.id, a.id]
    assert [r.id for r in (await knowledge.review.pending(T1)).items] == [c.id, b.id, a.id]
    assert [r.id for r in (await knowledge.review.pending(T2)).items] == [b.id, a.id]  # never t1's
    await knowledge.review.approve(a.id, RES, reason="confirmed")
    await knowledge.review.reject(c.id, T1, reason="wrong")
    edited = await knowledge.review.edit(b.id, RES, "Jane is in [[Porto]]", reason="corrected")
    assert edited.trust is TrustState.VERIFIED and edited.metadata["edited_from"] == b.id
    assert (await knowledge.review.pending(T1)).items == []
    assert {r.text for r in (await knowledge.store.list_about(jane.id, T1)).items} == {
        "Jane owns the pager",
        "Jane is in [[Porto]]",
    }
    actions = [(e.action, e.actor) for e in (await knowledge.store.list_activity(T1, limit=5)).items]
    assert actions[:4] == [
        ("record-deleted", "reviewer"),
        ("record-created", "reviewer"),
        ("record-rejected", "reviewer"),
        ("record-verified", "reviewer"),
    ]


async def test_search_drains_first_and_finds_fresh_records(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    record = await knowledge.append(jane.id, "Jane deploys the billing service on Fridays", T1, reason="chat")
    hits = await knowledge.search("billing deploys", T1)
    assert hits[0].id == record.id
    assert await knowledge.store.list_outbox() == []
    assert [v.record_id for v in await knowledge.store.list_vectors()] == [record.id]
    assert all(h.id != record.id for h in await knowledge.search("billing deploys", T2))  # sibling negative


async def test_semantic_hits_are_rechecked_and_rescope_moves_the_vector(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    record = await knowledge.append(jane.id, "Jane's laptop is a ThinkPad", T1, reason="chat")
    await knowledge.drain()
    assert [v.scope for v in await knowledge.store.list_vectors()] == [T1]
    await knowledge.rescope(record.id, T1, RES, reason="useful everywhere")
    assert record.id in {h.id for h in await knowledge.search("thinkpad laptop", T2)}
    assert [v.scope for v in await knowledge.store.list_vectors()] == [RES]
    semantic = await knowledge.index.semantic("laptop", T2, RecordView(), 5)
    assert [r.id for r in semantic] == [record.id]
    await knowledge.remove(record.id, RES, reason="outdated")
    assert record.id not in {h.id for h in await knowledge.search("thinkpad laptop", T1)}
    assert await knowledge.store.list_vectors() == []


async def test_semantic_ranking_skips_candidates_unless_asked(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    verified = await knowledge.append(jane.id, "Jane drinks green tea every morning", RES, reason="chat")
    hidden = await knowledge.append(
        jane.id, "Jane drinks coffee now", RES, reason="c", trust=TrustState.CANDIDATE
    )
    await knowledge.drain()  # semantic() reads the index as it is; search() drains itself
    semantic = await knowledge.index.semantic("morning tea green", RES, RecordView(), 5)
    assert [r.id for r in semantic] == [verified.id]
    assert [
        r.id for r in await knowledge.index.semantic("coffee", RES, RecordView(include_candidates=True), 5)
    ] == [hidden.id]
    ids = {h.id for h in await knowledge.search("jane drinks", RES)}
    assert verified.id in ids and hidden.id not in ids
    with_candidates = {
        h.id for h in await knowledge.search("jane drinks", RES, view=RecordView(include_candidates=True))
    }
    assert hidden.id in with_candidates


def test_reciprocal_rank_fusion() -> None:
    scores = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert sorted(scores, key=lambda key: -scores[key]) == ["a", "c", "b"]


async def test_knowledge_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with Knowledge.sqlite(path) as first:
        jane = await first.node("Jane", "person", RES)
        await first.append(jane.id, "Jane speaks Portuguese", T1, reason="chat")
    async with Knowledge.sqlite(path) as second:
        assert [r.text for r in (await second.store.list_about(jane.id, T1)).items] == [
            "Jane speaks Portuguese"
        ]
        assert (await second.search("portuguese", T1))[0].text == "Jane speaks Portuguese"


class FailingEmbedder:
    name = "failing-8"
    dimensions = 8

    async def embed(self, texts: object) -> object:
        raise RuntimeError("embedding service down")


async def test_a_failed_drain_releases_its_batch_for_a_retry(tmp_path: Path) -> None:
    from obsmem.errors import StaleSemanticIndexError
    from obsmem.knowledge import InMemoryKnowledgeStore, SemanticIndex

    store = InMemoryKnowledgeStore(clock=FakeClock())
    jane = await store.create_node("Jane", "person", RES, actor="t", reason="r")
    await store.append_record(RecordDraft(jane.id, "fact", RES), actor="t", reason="r")
    with pytest.raises(StaleSemanticIndexError, match="released"):
        await SemanticIndex(store, FailingEmbedder()).drain()  # type: ignore[arg-type]
    (entry,) = await store.list_outbox()
    assert entry.status == "pending" and entry.attempts == 1 and entry.claimed_by is None
    assert await SemanticIndex(store, LexicalHashEmbedder(16)).drain() == 1
    assert [v.embedder for v in await store.list_vectors()] == ["lexical-hash-16"]
