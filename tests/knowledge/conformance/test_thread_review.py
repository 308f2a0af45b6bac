"""``list_candidates(..., within=True, threads=True)`` and ``list_activity(..., threads=True)``: a
resource scope's review queue and audit log with its threads' rows (where capture writes
candidates), never a sibling resource's (``alice2``, a LIKE wildcard spelling) or another
resource's. On main the ``threads`` option did not exist (``TypeError``)."""

from __future__ import annotations

import pytest

from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft, TrustState

from .conftest import ACT, RES, T1, T2

pytestmark = pytest.mark.anyio


async def _candidate(store: TablesKnowledgeStore, scope: str) -> str:
    node = await store.resolve_node("User", scope)
    if node is None or node.scope != scope:
        node = await store.create_node("User", "person", scope, **ACT)
    record = await store.append_record(
        RecordDraft(node_id=node.id, text=f"a candidate at {scope}", scope=scope, trust=TrustState.CANDIDATE), **ACT
    )
    return record.id


async def test_a_resources_queue_and_log_hold_its_threads_and_nothing_beside(kstore: TablesKnowledgeStore) -> None:
    mine = {scope: await _candidate(kstore, scope) for scope in (RES, T1, T2)}
    beside = [await _candidate(kstore, scope) for scope in
              ("org:acme/resource:alice2", "org:acme/resource:alice2/thread:t1", "org:acme/resource:al_ce/thread:t1",
               "org:acme/resource:bob/thread:t1", "org:acme")]  # fmt: skip

    queue = await kstore.list_candidates(RES, within=True, threads=True, limit=100)
    assert sorted(r.id for r in queue.items) == sorted(mine.values())
    assert [r.id for r in (await kstore.list_candidates(RES, within=True, limit=100)).items] == [mine[RES]]
    # paged: two at a time, the same set, nothing twice
    seen: list[str] = []
    after = None
    while True:
        page = await kstore.list_candidates(RES, within=True, threads=True, after=after, limit=2)
        seen += [r.id for r in page.items]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert sorted(seen) == sorted(mine.values())

    log = await kstore.list_activity(RES, threads=True, limit=100)
    subjects = {e.subject_id for e in log.items}
    assert set(mine.values()) <= subjects and not subjects & set(beside[:4])
    assert mine[T1] not in {e.subject_id for e in (await kstore.list_activity(RES, limit=100)).items}
