"""The record listings' page cursor (``after``: the review queue, records about / mentioning /
related to a node, a thread's records) on every knowledge adapter: one that is no record id
('garbage', lowercase, 27 characters …) is an InvalidInputError naming ``after``, as the audit
log's is (5f9b9cd). It was compared with the record ids as it was, so it answered the first page
as if it had been honoured (newest first: anything sorting after every id) or nothing. The node
listing's cursor, refused already, names ``after`` too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from obsmem.errors import InvalidInputError
from obsmem.knowledge import ReviewQueue
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import Page, Record, RecordDraft, RecordView, TrustState

from .world import ACT, RES, T1

pytestmark = pytest.mark.anyio

GARBAGE = [
    "garbage", "z" * 26, "01ARZ3NDEKTSV4RRFFQ69G5FAVX", "01arz3ndektsv4rrffq69g5fav", "~", "8" + "0" * 25,
]

_ALL = RecordView(include_candidates=True, include_superseded=True)

Listing = Callable[[TablesKnowledgeStore, str, str | None], Awaitable[Page[Record]]]


async def _world(kstore: TablesKnowledgeStore) -> str:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    for n in range(3):
        draft = RecordDraft(
            jane.id, f"Jane fact {n}", T1, source_thread_id="t1", trust=TrustState.CANDIDATE, mentions=[jane.id]
        )
        await kstore.append_record(draft, **ACT)
    return jane.id


LISTINGS: dict[str, Listing] = {
    "candidates": lambda s, node, after: s.list_candidates(T1, after=after, limit=1),
    "review": lambda s, node, after: ReviewQueue(s, "tester").pending(T1, after=after, limit=1),
    "about": lambda s, node, after: s.list_about(node, T1, view=_ALL, after=after, limit=1),
    "mentioning": lambda s, node, after: s.list_mentioning(node, T1, view=_ALL, after=after, limit=1),
    "related": lambda s, node, after: s.list_related(node, T1, view=_ALL, after=after, limit=1),
    "by_source": lambda s, node, after: s.list_by_source("t1", T1, view=_ALL, after=after, limit=1),
}



@pytest.mark.parametrize("listing", LISTINGS)
@pytest.mark.parametrize("cursor", GARBAGE)
async def test_a_record_cursor_that_is_no_record_id_is_refused_naming_after(
    kstore: TablesKnowledgeStore, listing: str, cursor: str
) -> None:
    node = await _world(kstore)
    with pytest.raises(InvalidInputError) as caught:
        await LISTINGS[listing](kstore, node, cursor)
    assert caught.value.argument == "after", caught.value


@pytest.mark.parametrize("listing", LISTINGS)
async def test_the_cursors_a_listing_answers_still_page(kstore: TablesKnowledgeStore, listing: str) -> None:
    node = await _world(kstore)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await LISTINGS[listing](kstore, node, cursor)
        seen += [r.id for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 3


async def test_a_node_cursor_that_is_none_names_after(kstore: TablesKnowledgeStore) -> None:
    await kstore.create_node("Alpha", "person", RES, **ACT)
    with pytest.raises(InvalidInputError) as caught:
        await kstore.list_nodes(T1, after="garbage")
    assert caught.value.argument == "after"


async def test_a_record_id_the_listings_could_not_page_by_is_refused(kstore: TablesKnowledgeStore) -> None:
    """The listings page by record id, so an appended record's own id must be one a cursor may be:
    a record 'fact-1' would end a page whose next_cursor the next call refused."""
    node = await _world(kstore)
    with pytest.raises(InvalidInputError) as caught:
        await kstore.append_record(RecordDraft(node, "Jane drinks tea", T1, record_id="fact-1"), **ACT)
    assert caught.value.argument == "record_id"
    assert await kstore.load_record("fact-1") is None
    chosen = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    made = await kstore.append_record(RecordDraft(node, "Jane drinks tea", T1, record_id=chosen), **ACT)
    assert made.id == chosen
