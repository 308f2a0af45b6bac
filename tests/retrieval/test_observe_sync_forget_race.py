"""An observation's index sync racing a forget (found by helper 209): the observation wrote the
head, a forget scrubbed it and re-embedded the scrubbed groups, then the observation's sync wrote
the vectors of the text the forget took out, and a search for the value still found the group (a
second forget did not clear them: the record's text no longer changed). The sync now settles the
groups it wrote against the head as stored (GroupIndex.settle)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from obsmem import MemoryConfig
from obsmem.om.group_index import thread_namespace
from obsmem.vectors import InMemoryVectorIndex

from tests.retrieval.helpers import dated_messages, memory_for, replay, retrieval_config
from tests.retrieval.test_reindex_groups_forget_race_209 import SECRET, HeldOnce

pytestmark = pytest.mark.anyio


async def test_an_observations_sync_does_not_bring_back_a_forgotten_value(tmp_path: Path) -> None:
    base = retrieval_config(vector=True, scope="thread")
    config = MemoryConfig(scope="thread", observation=base.observation, reflection=base.reflection,
                          retrieval=base.retrieval)
    embedder = HeldOnce()
    index = InMemoryVectorIndex(embedder.dimensions)
    async with memory_for(tmp_path / "m.db", config, embedder=embedder, vector_index=index) as memory:
        embedder.armed = True
        run = asyncio.ensure_future(replay(memory, "t1", "alice", dated_messages(80)))
        with anyio.fail_after(30):
            await embedder.entered.wait()
        with anyio.fail_after(30):
            await memory.forget(SECRET, thread_id="t1")
        embedder.go.set()
        with anyio.fail_after(60):
            await run
        await memory.forget(SECRET, thread_id="t1")  # later messages may hold it again: forgotten too
        query = (await embedder.embed([SECRET]))[0]
        hits = await index.search(query, 5, namespace_prefix=thread_namespace("alice", "t1"))
        assert [h for h in hits if h.score > 0] == []
