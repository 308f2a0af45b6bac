"""A record erased while the semantic index is embedding it must not get its vector back.

SemanticIndex.drain reads a record, awaits the embedder (a remote one takes a while), then puts
the vector. An erase in between (Knowledge.erase, or a deleted thread's purge) deletes the
record, its outbox entries and its vectors in one transaction; the drain then wrote the vector
anyway: a row holding the erased record's id, its embedding and its scope key (which names the
resource and thread ids a purge removes) stayed in the knowledge file, answered by nothing and
never deleted again. Likewise an entry whose lease ran out while its embedding was computed,
and that another worker finished (and a later removal deleted the vector), put a removed
record's vector back."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from obsmem.embeddings import LexicalHashEmbedder
from obsmem.embeddings.base import EmbeddingMatrix
from obsmem.knowledge import Knowledge
from obsmem.knowledge.semantic_index import SemanticIndex

pytestmark = pytest.mark.anyio

THREAD = "org:acme/resource:alice-0c1f/thread:t-77e2"


class HeldEmbedder:
    """Embeds as the lexical embedder does, but waits for ``release`` once it has been asked."""

    def __init__(self) -> None:
        self.inner = LexicalHashEmbedder(64)
        self.name = self.inner.name
        self.asked = anyio.Event()
        self.release = anyio.Event()
        self.hold = True

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        if self.hold:
            self.asked.set()
            await self.release.wait()
        return await self.inner.embed(texts)


@pytest.fixture(params=["memory", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    def build(embedder: HeldEmbedder) -> Knowledge:
        if request.param == "memory":
            return Knowledge.in_memory(embedder=embedder)
        return Knowledge.sqlite(tmp_path / "k.db", embedder=embedder)
    return build


async def test_an_erase_during_embedding_leaves_no_vector(make) -> None:  # type: ignore[no-untyped-def]
    embedder = HeldEmbedder()
    async with make(embedder) as knowledge:
        user = await knowledge.node("User", "person", THREAD)
        record = await knowledge.append(user.id, "their passport number is ZX-4471", THREAD, reason="said")
        async with anyio.create_task_group() as group:
            group.start_soon(knowledge.drain)
            await embedder.asked.wait()
            await knowledge.erase([record.id], THREAD, reason="the user asked")
            embedder.release.set()
        assert [v.record_id for v in await knowledge.store.list_vectors()] == []


async def test_a_purge_during_embedding_leaves_no_vector(make) -> None:  # type: ignore[no-untyped-def]
    embedder = HeldEmbedder()
    async with make(embedder) as knowledge:
        user = await knowledge.node("User", "person", THREAD)
        await knowledge.append(user.id, "their passport number is ZX-4471", THREAD, reason="said")
        async with anyio.create_task_group() as group:
            group.start_soon(knowledge.drain)
            await embedder.asked.wait()
            await knowledge.store.purge_scope("org:acme/resource:alice-0c1f", actor="admin", reason="deleted")
            embedder.release.set()
        assert await knowledge.store.list_vectors() == []


async def test_a_drain_whose_lease_ran_out_does_not_put_a_removed_records_vector_back(make) -> None:  # type: ignore[no-untyped-def]
    embedder = HeldEmbedder()
    async with make(embedder) as knowledge:
        user = await knowledge.node("User", "person", THREAD)
        record = await knowledge.append(user.id, "their passport number is ZX-4471", THREAD, reason="said")
        slow = SemanticIndex(knowledge.store, embedder, worker_id="slow")
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: slow.drain(lease_seconds=0))  # its lease is over at once
            await embedder.asked.wait()
            embedder.hold = False
            await SemanticIndex(knowledge.store, embedder, worker_id="other").drain(lease_seconds=0)  # takes it over
            await knowledge.remove(record.id, THREAD, reason="wrong")
            await SemanticIndex(knowledge.store, embedder, worker_id="other").drain(lease_seconds=0)  # deletes the vector
            embedder.release.set()
        assert await knowledge.store.list_vectors() == []


async def test_control_a_drain_puts_the_vector(make) -> None:  # type: ignore[no-untyped-def]
    embedder = HeldEmbedder()
    embedder.hold = False
    async with make(embedder) as knowledge:
        user = await knowledge.node("User", "person", THREAD)
        record = await knowledge.append(user.id, "their passport number is ZX-4471", THREAD, reason="said")
        await knowledge.drain()
        assert [v.record_id for v in await knowledge.store.list_vectors()] == [record.id]
        assert [h.id for h in await knowledge.search("passport", THREAD)] == [record.id]
