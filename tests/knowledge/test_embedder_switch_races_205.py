"""Re-embedding after an embedder change, as a user meets it (helper 205).

* An embedder whose name stays while its dimension changes (an application's own embedder, named
  ``custom``, moved from 256 to 384 numbers): the stored vectors have the name the index searches
  with but the old length, so every search failed with numpy's matmul error, for ever, and
  neither a drain nor ``reindex`` re-embedded them (only the name was compared).
* Several searches at once right after the switch (a server's requests): each drain queued the
  same first page of the old vectors, so each of those records was embedded once per search.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"


class Custom:
    """An application's own embedder: one name whatever its dimension."""

    def __init__(self, dimensions: int) -> None:
        self.inner = LexicalHashEmbedder(dimensions)
        self.dimensions = dimensions
        self.name = "custom"

    async def embed(self, texts: Sequence[str]):  # type: ignore[no-untyped-def]
        return await self.inner.embed(texts)


class Counting(LexicalHashEmbedder):
    """The default embedder, counting the texts it embeds (a paid API counts them too)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    async def embed(self, texts: Sequence[str]):  # type: ignore[no-untyped-def]
        self.texts += len(texts)
        await asyncio.sleep(0)  # another request runs meanwhile, as with a real model
        return await super().embed(texts)


async def _seed(knowledge: Knowledge, texts: list[str]) -> None:
    user = await knowledge.node("User", "person", ALICE)
    for text in texts:
        await knowledge.append(user.id, text, ALICE, reason="x")
    await knowledge.drain()


async def test_same_name_new_dimension_search_works_and_re_embeds(knowledge: Knowledge) -> None:
    await _seed(Knowledge(knowledge.store, embedder=Custom(256)), ["their dog is called Rex"])
    new = Knowledge(knowledge.store, embedder=Custom(384))
    assert [h.text for h in await new.search("dog called Rex", ALICE)] == ["their dog is called Rex"]
    semantic = await new.index.semantic("dog called Rex", ALICE, RecordView(), 5)
    assert [r.text for r in semantic] == ["their dog is called Rex"]
    assert {v.vector.shape for v in await knowledge.store.list_vectors()} == {(384,)}


async def test_same_name_new_dimension_reindex(knowledge: Knowledge) -> None:
    await _seed(Knowledge(knowledge.store, embedder=Custom(256)), ["alice keeps bees", "alice likes tea"])
    new = Knowledge(knowledge.store, embedder=Custom(384))
    assert await new.reindex() == 2
    assert {v.vector.shape for v in await knowledge.store.list_vectors()} == {(384,)}
    assert await new.reindex() == 0


async def test_concurrent_searches_embed_each_old_record_once(knowledge: Knowledge) -> None:
    await _seed(Knowledge(knowledge.store, embedder=LexicalHashEmbedder(256)), [f"fact {i}" for i in range(300)])
    counting = Counting()
    searches = 8
    await asyncio.gather(*(Knowledge(knowledge.store, embedder=counting).search("fact", ALICE) for _ in range(searches)))
    re_embedded = counting.texts - searches  # one query each
    assert 0 < re_embedded <= 300
    for _ in range(3):  # the drains go on from there: every old record, once
        await Knowledge(knowledge.store, embedder=counting).search("fact", ALICE)
    assert counting.texts - searches - 3 == 300
    assert {v.embedder for v in await knowledge.store.list_vectors()} == {counting.name}
