"""reindex_groups racing forget: the reindex read the groups before the forget scrubbed them and
wrote their vectors after the forget re-embedded them, so a search for the forgotten value still
ranked the group that had held it (the value's existence told by the index)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from obsmem import MemoryConfig
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.om.group_index import thread_namespace
from obsmem.vectors import InMemoryVectorIndex

from .helpers import dated_messages, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio
SECRET = "Terraform"


class HeldOnce(LexicalHashEmbedder):
    """Holds the first call that embeds the secret, until ``go``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.entered, self.go = asyncio.Event(), asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.armed and any(SECRET.casefold() in t.casefold() for t in texts):
            self.armed = False
            self.entered.set()
            await self.go.wait()
        return await super().embed(texts)  # type: ignore[return-value]


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_a_forgotten_value_is_not_left_in_the_index_by_a_reindex(tmp_path: Path, scope: str) -> None:
    base = retrieval_config(vector=True, scope=scope)
    config = MemoryConfig(scope=scope, observation=base.observation, reflection=base.reflection,
                          retrieval=base.retrieval)
    embedder = HeldOnce()
    index = InMemoryVectorIndex(embedder.dimensions)
    async with memory_for(tmp_path / "m.db", config, embedder=embedder, vector_index=index) as memory:
        await replay(memory, "t1", "alice", dated_messages(80))
        query = (await embedder.embed([SECRET]))[0]
        hits = await index.search(query, 5, namespace_prefix=thread_namespace("alice", "t1"))
        assert hits and hits[0].score > 0  # the control: the value is in the index
        embedder.armed = True
        run = asyncio.ensure_future(memory.reindex_groups(thread_id="t1"))
        with anyio.fail_after(30):
            await embedder.entered.wait()
        await memory.forget(SECRET, thread_id="t1")
        embedder.go.set()
        with anyio.fail_after(30):
            await run
        hits = await index.search(query, 5, namespace_prefix=thread_namespace("alice", "t1"))
        assert [h for h in hits if h.score > 0] == []
