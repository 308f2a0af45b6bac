"""Every read API: a positive control from thread t1 and a sibling-thread negative from t2.

Both halves run on the same fixture, so a negative can never pass against an empty store: if
the positive finds the thread-private item, the store holds it, and t2 still must not see it.
Resource-level items are seen from both threads (a second positive that proves t2 is not
simply blind).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordView

from .world import T1, T2, World, build_world

pytestmark = pytest.mark.anyio

Read = Callable[[TablesKnowledgeStore, World, str], Awaitable[set[str]]]


async def _get_record(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    found = await s.get_record(w.fact.id, scope)
    return {found.id} if found else set()


async def _about(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {r.id for r in (await s.list_about(w.jane.id, scope)).items}


async def _mentioning(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {r.id for r in (await s.list_mentioning(w.tea.id, scope)).items}


async def _related(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {r.id for r in (await s.list_related(w.tea.id, scope)).items}


async def _by_source(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {r.id for r in (await s.list_by_source("t1", scope)).items}


async def _candidates(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {r.id for r in (await s.list_candidates(scope)).items}


async def _search(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {h.id for h in await s.search_lexical("likes tea", scope)}


async def _activity(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {e.subject_id for e in (await s.list_activity(scope)).items}


async def _get_node(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    found = await s.get_node(w.secret.id, scope)
    return {found.id} if found else set()


async def _resolve(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    found = await s.resolve_node("SECRET PLAN", scope)
    return {found.id} if found else set()


async def _nodes(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {n.id for n in (await s.list_nodes(scope)).items}


async def _tombstones(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    return {t.id for t in await s.list_tombstones(scope)}


async def _as_of_and_known(s: TablesKnowledgeStore, w: World, scope: str) -> set[str]:
    view = RecordView(as_of=w.fact.captured_at, as_known_at=w.fact.captured_at)
    return {r.id for r in (await s.list_about(w.jane.id, scope, view=view)).items}


# (read, which world item is thread-private to t1)
READS: list[tuple[Read, Callable[[World], str]]] = [
    (_get_record, lambda w: w.fact.id),
    (_about, lambda w: w.fact.id),
    (_mentioning, lambda w: w.fact.id),
    (_related, lambda w: w.fact.id),
    (_by_source, lambda w: w.fact.id),
    (_candidates, lambda w: w.candidate.id),
    (_search, lambda w: w.fact.id),
    (_activity, lambda w: w.fact.id),
    (_get_node, lambda w: w.secret.id),
    (_resolve, lambda w: w.secret.id),
    (_nodes, lambda w: w.secret.id),
    (_tombstones, lambda w: w.tombstone.id),
    (_as_of_and_known, lambda w: w.fact.id),
]


@pytest.mark.parametrize(("read", "private"), READS, ids=[r.__name__.strip("_") for r, _ in READS])
async def test_positive_control_and_sibling_negative(
    kstore: TablesKnowledgeStore, read: Read, private: Callable[[World], str]
) -> None:
    world = await build_world(kstore)
    assert private(world) in await read(kstore, world, T1), "positive control: t1 sees its own item"
    assert private(world) not in await read(kstore, world, T2), "sibling thread t2 must not see it"


async def test_shared_items_are_seen_from_both_threads(kstore: TablesKnowledgeStore) -> None:
    world = await build_world(kstore)
    for scope in (T1, T2):
        assert await kstore.resolve_node("jane", scope) == world.jane
        assert world.tea.id in {n.id for n in (await kstore.list_nodes(scope)).items}


async def test_a_different_node_returns_nothing(kstore: TablesKnowledgeStore) -> None:
    world = await build_world(kstore)
    assert (await kstore.list_about(world.tea.id, T1)).items == []
    assert [r.id for r in (await kstore.list_about(world.jane.id, T1)).items] == [world.fact.id]
