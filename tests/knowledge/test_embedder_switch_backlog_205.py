"""A search after an embedder switch, with a backlog of writes a drain may still apply (helper 205).

A drain applies up to 5,000 outbox entries and refuses more ("drain again"). After the embedder
changes, each drain also queues a page of 200 old vectors for re-embedding, and it queued them
ahead of the backlog's limit: 4,850 fresh writes (an import, a bulk capture) that a search had
always drained became 5,050 entries, and the first search after the switch raised
StaleSemanticIndexError instead of answering; so did ``reindex``. The page now has batches of
its own.
"""

from __future__ import annotations

import pytest

from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"


async def _switched_with_backlog(old: Knowledge) -> Knowledge:
    user = await old.node("User", "person", ALICE)
    for i in range(200):
        await old.append(user.id, f"old fact {i}", ALICE, reason="x")
    await old.drain()
    new = Knowledge(old.store, embedder=LexicalHashEmbedder())  # another embedder, over the same store
    for i in range(4850):  # fewer than one drain applies
        await new.append(user.id, f"new fact {i}", ALICE, reason="x")
    return new


async def test_search_after_switch_with_a_drainable_backlog() -> None:
    async with Knowledge.in_memory(embedder=LexicalHashEmbedder(256)) as old:
        new = await _switched_with_backlog(old)
        hits = await new.search("new fact 17", ALICE)
        assert hits and hits[0].text == "new fact 17"
        embedders = [v.embedder for v in await new.store.list_vectors()]
        assert embedders.count(new.embedder.name) == 4850 + 200  # the backlog, and the first page
        assert await new.store.list_outbox() == []


async def test_reindex_with_a_drainable_backlog() -> None:
    async with Knowledge.in_memory(embedder=LexicalHashEmbedder(256)) as old:
        new = await _switched_with_backlog(old)
        assert await new.reindex() == 200
        assert {v.embedder for v in await new.store.list_vectors()} == {new.embedder.name}
        assert len(await new.store.list_vectors()) == 5050
