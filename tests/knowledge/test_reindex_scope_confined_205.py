"""``reindex(scope=...)`` (``obsmem knowledge reindex --scope``) reads and re-embeds only that
scope's subtree (helper 205).

Its labels were confined, but after each page it drained the whole outbox: every other org's
pending writes were read (their text handed to the reindex's embedder) and embedded with the
reindex's embedder. Now a scoped reindex applies only the outbox entries stored in its subtree;
the others wait for the next drain.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ACME = "org:acme/resource:alice"
OTHER = "org:other/resource:bob"


class Seen(LexicalHashEmbedder):
    """The default embedder, keeping the texts it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return await super().embed(texts)


async def test_scoped_reindex_leaves_other_orgs_pending_writes(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=LexicalHashEmbedder(256))
    alice = await old.node("User", "person", ACME)
    await old.append(alice.id, "alice keeps bees", ACME, reason="x")
    await old.drain()
    bob = await old.node("User", "person", OTHER)
    await old.append(bob.id, "bob's PIN hint is blue", OTHER, reason="x")  # not drained yet

    seen = Seen()
    assert await Knowledge(knowledge.store, embedder=seen).reindex(scope="org:acme") == 1
    assert seen.texts == ["User: alice keeps bees"]
    assert {v.scope: v.embedder for v in await knowledge.store.list_vectors()} == {ACME: seen.name}
    assert [e.scope for e in await knowledge.store.list_outbox()] == [OTHER]

    await old.drain()  # the other org's write waits for its own drain
    assert {v.scope: v.embedder for v in await knowledge.store.list_vectors()} == {
        ACME: seen.name, OTHER: old.embedder.name,
    }


async def test_scoped_reindex_still_applies_its_own_pending_writes(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=LexicalHashEmbedder(256))
    alice = await old.node("User", "person", ACME)
    await old.append(alice.id, "alice keeps bees", ACME, reason="x")
    await old.drain()
    await old.append(alice.id, "alice likes tea", f"{ACME}/thread:t1", reason="x")  # pending, in scope
    new = Knowledge(knowledge.store)
    assert await new.reindex(scope=ACME) == 1
    assert {v.embedder for v in await knowledge.store.list_vectors()} == {new.embedder.name}
    assert len(await knowledge.store.list_vectors()) == 2
    assert await knowledge.store.list_outbox() == []
