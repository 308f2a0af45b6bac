"""A record of Alice's resource removed as superseded by her thread t1's newer value reads alike
from every scope that sees the record, with ``include_deleted=True`` alone: t1 (which sees the
successor), t2 (which does not) and the resource itself (helper-194).

Before, t1 left it out (superseded records need ``include_superseded``) while t2 and the resource
returned it as a plain removal: the same read of the same record gave two answers. Now it is
superseded everywhere; only t1 learns by which record (``superseded_by``), as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

from tests.knowledge.test_sibling_successor_185 import CONFIG, RESOURCE, T1, T2, _curated

DELETED = RecordView(include_deleted=True)
SUPERSEDED = RecordView(include_deleted=True, include_superseded=True)


async def test_include_deleted_reads_alike_in_t1_t2_and_the_resource(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, new = await _curated(memory, knowledge)
        store = knowledge.store
        user = await knowledge.node("User", "person", RESOURCE)
        for scope in (T1, T2, RESOURCE):
            assert await store.get_record(old, scope, DELETED) is None, scope
            about = (await store.list_about(user.id, scope, view=DELETED)).items
            assert old not in [r.id for r in about], scope
            found = await store.get_record(old, scope, SUPERSEDED)
            assert found is not None and found.deleted_at is not None, scope
            assert found.superseded_by == (new if scope == T1 else None), scope


async def test_a_plain_removal_reads_alike_too(knowledge: Knowledge) -> None:
    """Control: removed from t1 without a successor: a deleted record in every scope."""
    user = await knowledge.node("User", "person", RESOURCE)
    cat = await knowledge.append(user.id, "they own a cat", RESOURCE, reason="from the CRM")
    await knowledge.remove(cat.id, T1, reason="the user said so")
    for scope in (T1, T2, RESOURCE):
        found = await knowledge.store.get_record(cat.id, scope, DELETED)
        assert found is not None and found.deleted_at is not None and found.superseded_by is None, scope


async def test_t2_reads_no_validity_it_cannot_date(knowledge: Knowledge) -> None:
    """Read ``as_of`` a time with ``include_deleted=True``, t1 dates the old value's end by its own
    record (March); t2 and the resource cannot, so they read no history of it at all (as without
    ``include_deleted``). Before, they returned it as valid at any time after January, April
    included, where t1 reads that it no longer held."""
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, _ = await _curated(memory, knowledge)
        store = knowledge.store
        for month in (2, 4):
            view = RecordView(include_deleted=True, include_superseded=True, as_of=datetime(2025, month, 1, tzinfo=UTC))
            in_t1 = await store.get_record(old, T1, view)
            assert (in_t1 is not None) == (month == 2)
            for scope in (T2, RESOURCE):
                assert await store.get_record(old, scope, view) is None, (scope, month)
