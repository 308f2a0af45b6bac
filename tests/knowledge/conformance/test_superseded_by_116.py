"""``list_superseded_by`` on every knowledge adapter: the records removed as superseded by one
record, oldest first, page by page, as the scope sees them; none once restored, none for an
unknown record, and a cursor that is no record id is refused naming ``after``."""

from __future__ import annotations

import pytest

from obsmem.errors import InvalidInputError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft, RecordView

from .world import ACT, RES, T1, T2

pytestmark = pytest.mark.anyio

REMOVED = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)


async def test_the_records_one_record_superseded_page_by_page(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    olds = [await kstore.append_record(RecordDraft(jane.id, f"lives in city {n}", RES, attribute="city"),
                                       **ACT) for n in range(3)]
    mine = await kstore.append_record(RecordDraft(jane.id, "lives in a thread's city", T2, attribute="city"),
                                      **ACT)
    other = await kstore.append_record(RecordDraft(jane.id, "lives in Oslo", RES, attribute="city"), **ACT)
    unrelated = await kstore.append_record(RecordDraft(jane.id, "likes tea", RES), **ACT)
    new = await kstore.append_record(RecordDraft(jane.id, "lives in Lisbon", RES, attribute="city"), **ACT)
    for old in olds:
        await kstore.remove_record(old.id, RES, superseded_by=new.id, **ACT)
    await kstore.remove_record(mine.id, T2, superseded_by=new.id, **ACT)
    await kstore.remove_record(unrelated.id, RES, **ACT)  # removed, but superseded by nothing
    assert other.id != new.id

    first = await kstore.list_superseded_by(new.id, RES, view=REMOVED, limit=2)
    assert [r.id for r in first.items] == [olds[0].id, olds[1].id] and first.next_cursor == olds[1].id
    rest = await kstore.list_superseded_by(new.id, RES, view=REMOVED, after=first.next_cursor, limit=2)
    assert [r.id for r in rest.items] == [olds[2].id] and rest.next_cursor is None  # not the thread's
    from_t2 = await kstore.list_superseded_by(new.id, T2, view=REMOVED)
    assert [r.id for r in from_t2.items] == [*(o.id for o in olds), mine.id]
    assert (await kstore.list_superseded_by(new.id, T1, view=RecordView())).items == []  # removed: hidden

    await kstore.restore_record(olds[1].id, RES, **ACT)
    assert [r.id for r in (await kstore.list_superseded_by(new.id, RES, view=REMOVED)).items] == [
        olds[0].id, olds[2].id]
    assert (await kstore.list_superseded_by(other.id, RES, view=REMOVED)).items == []
    assert (await kstore.list_superseded_by("01ARZ3NDEKTSV4RRFFQ69G5FAV", RES, view=REMOVED)).items == []
    with pytest.raises(InvalidInputError) as caught:
        await kstore.list_superseded_by(new.id, RES, view=REMOVED, after="garbage")
    assert caught.value.argument == "after"
