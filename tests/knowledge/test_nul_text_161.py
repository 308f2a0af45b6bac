"""A record whose text holds a NUL character is data, on PostgreSQL too (helper-161).

Text a user pasted, a tool returned or an application stored may hold NUL. The PostgreSQL
adapter keeps each row as JSON text (NUL written ``\\u0000``) and filters some reads on a field
of that JSON (``doc::jsonb ->> …``), a cast PostgreSQL refuses for a document holding
``\\u0000``: one such record made every read that filtered its rows fail with StorageError, for
everyone who sees it: the node's records (``list_about``), the scope's review queue, curation's
worklist (``list_by_source``) and search (so remind), while SQLite and memory served it. An
``attribute`` or ``source_thread_id`` holding NUL (values reads compare with: PostgreSQL cannot
take them as a query's parameter) is refused on every adapter alike.
"""

from __future__ import annotations

import pytest

from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge, RecordView, TrustState

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"


async def test_a_record_holding_nul_breaks_no_read(knowledge: Knowledge) -> None:
    user = await knowledge.node("User", "person", ALICE)
    tea = await knowledge.append(user.id, "likes green tea", ALICE, reason="said", attribute="drink",
                                 source_thread_id="t1")
    pending = await knowledge.append(user.id, "moved to Berlin", ALICE, reason="captured",
                                     trust=TrustState.CANDIDATE, source_thread_id="t1")
    pasted = await knowledge.append(user.id, "pasted from a tool: ab\x00cd", ALICE, reason="a tool said \x00",
                                    source_thread_id="t1", metadata={"raw": "x\x00y"}, attribute="tool output")
    assert pasted.text == "pasted from a tool: ab\x00cd"

    about = await knowledge.store.list_about(user.id, ALICE)
    assert {r.id for r in about.items} == {tea.id, pasted.id}
    assert [r.text for r in about.items if r.id == pasted.id] == ["pasted from a tool: ab\x00cd"]
    assert [r.id for r in (await knowledge.review.pending(ALICE)).items] == [pending.id]
    by_source = await knowledge.store.list_by_source("t1", ALICE, view=RecordView(include_candidates=True))
    assert [r.id for r in by_source.items] == [tea.id, pending.id, pasted.id]
    assert [h.id for h in await knowledge.search("green tea", ALICE)][:1] == [tea.id]
    # a newer value of its attribute still closes it
    newer = await knowledge.append(user.id, "pasted from a tool: ef", ALICE, reason="a tool said",
                                   attribute="tool output")
    assert {r.id for r in (await knowledge.store.list_about(user.id, ALICE)).items} == {tea.id, newer.id}
    removed = await knowledge.remove(pasted.id, ALICE, reason="cleanup")
    assert removed.deleted_at is not None


@pytest.mark.parametrize("field", ["attribute", "source_thread_id"])
async def test_a_nul_in_a_compared_field_is_refused_alike(knowledge: Knowledge, field: str) -> None:
    user = await knowledge.node("User", "person", ALICE)
    with pytest.raises(InvalidInputError, match="NUL"):
        await knowledge.append(user.id, "likes tea", ALICE, reason="said", **{field: "a\x00b"})  # type: ignore[arg-type]
    assert (await knowledge.store.list_about(user.id, ALICE)).items == []


async def test_an_id_holding_nul_is_one_that_does_not_exist(knowledge: Knowledge) -> None:
    """On PostgreSQL a look-up by an id holding NUL (``/api/knowledge/records/ab%00c``) failed with
    StorageError, where SQLite and memory answer "not found"."""
    from obsmem.errors import KnowledgeNotFoundError

    user = await knowledge.node("User", "person", ALICE)
    await knowledge.append(user.id, "likes tea", ALICE, reason="said", source_thread_id="t1")
    assert await knowledge.store.get_record("01ABC\x00", ALICE) is None
    assert await knowledge.store.get_node("01ABC\x00", ALICE) is None
    assert (await knowledge.store.list_about("01ABC\x00", ALICE)).items == []
    assert (await knowledge.store.list_related("01ABC\x00", ALICE)).items == []
    assert (await knowledge.store.list_by_source("t\x00", ALICE)).items == []
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.review.approve("01ABC\x00", ALICE, reason="looks right")
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.remove("01ABC\x00", ALICE, reason="cleanup")
    assert [r.text for r in (await knowledge.store.list_about(user.id, ALICE)).items] == ["likes tea"]
