"""reindex_groups racing delete_thread: the delete removes the thread's vectors while the
reindex's embedder call is in flight; the reindex then writes them back (delete means gone)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from obsmem import MemoryConfig
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.om.group_index import thread_namespace
from obsmem.vectors import InMemoryVectorIndex

from tests.retrieval.helpers import dated_messages, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio


class Held(LexicalHashEmbedder):
    hold = False

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go = asyncio.Event(), asyncio.Event()

    async def embed(self, texts):  # type: ignore[no-untyped-def]
        if self.hold:
            self.entered.set()
            await self.go.wait()
        return await super().embed(texts)


@pytest.mark.parametrize("by", ["thread", "resource"])
@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_a_deleted_threads_vectors_do_not_come_back_from_a_reindex(tmp_path: Path, scope: str, by: str) -> None:
    base = retrieval_config(vector=True, scope=scope)
    config = MemoryConfig(scope=scope, observation=base.observation, reflection=base.reflection,
                          retrieval=base.retrieval)
    embedder = Held()
    index = InMemoryVectorIndex(embedder.dimensions)
    async with memory_for(tmp_path / "m.db", config, embedder=embedder, vector_index=index) as memory:
        await replay(memory, "t1", "alice", dated_messages(80))
        assert await index.count(thread_namespace("alice", "t1")) > 0
        embedder.hold = True
        ids = {"thread_id": "t1"} if by == "thread" else {"resource_id": "alice"}
        run = asyncio.ensure_future(memory.reindex_groups(**ids))
        with anyio.fail_after(30):
            await embedder.entered.wait()
        assert await memory.delete_thread("t1")
        assert await index.count(thread_namespace("alice", "t1")) == 0
        embedder.go.set()
        try:
            with anyio.fail_after(30):
                await run
        except Exception:  # noqa: BLE001
            pass  # refusing is fine; writing back is not
        assert await index.count(thread_namespace("alice", "t1")) == 0
