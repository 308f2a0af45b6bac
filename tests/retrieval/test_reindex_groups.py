"""Recall's search after the embedder changes: ``Memory.reindex_groups``.

A vector index holds one embedder's vectors (another embedder's is refused: scores would not
compare), so switching embedders means a new, empty index, and the groups observed before were
never found by meaning again: groups are indexed only as they are observed. ``reindex_groups``
embeds what a thread or a resource holds now, in thread and in resource scope."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import ConfigError, MemoryConfig
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import InvalidInputError, ThreadNotFoundError
from obsmem.vectors import SQLiteVectorIndex

from .helpers import dated_messages, groups_of, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio

QUERY = "Terraform billing service deploy"


async def _index(path: Path, embedder: LexicalHashEmbedder) -> SQLiteVectorIndex:
    return await SQLiteVectorIndex.open(path, dimensions=embedder.dimensions, space=embedder.name,
                                        name=embedder.name)  # fmt: skip


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_a_new_embedders_index_finds_the_old_groups_after_a_reindex(tmp_path: Path, scope: str) -> None:
    base = retrieval_config(vector=True, scope=scope)
    config = MemoryConfig(scope=scope, observation=base.observation, reflection=base.reflection,
                          retrieval=base.retrieval)  # fmt: skip
    old = LexicalHashEmbedder(256)
    index = await _index(tmp_path / "v.db", old)
    async with memory_for(tmp_path / "m.db", config, embedder=old, vector_index=index) as memory:
        await replay(memory, "t1", "alice", dated_messages(80))
        await replay(memory, "t2", "alice", dated_messages(40, prefix="b"))
        before = await memory.recall("t1", mode="search", query=QUERY, limit=3)
        assert before.groups
    await index.close()

    new = LexicalHashEmbedder(384)
    with pytest.raises(ConfigError):  # the old index holds another embedder's vectors
        await SQLiteVectorIndex.open(tmp_path / "v.db", dimensions=new.dimensions, space=new.name, name=old.name)
    index = await _index(tmp_path / "v.db", new)
    async with memory_for(tmp_path / "m.db", config, embedder=new, vector_index=index) as memory:
        assert (await memory.recall("t1", mode="search", query=QUERY, limit=3)).groups == ()  # the gap
        record = await memory.get_record("t1")
        assert record is not None
        t1_groups = [g for g in groups_of(record.active_observations) if g.thread_id == "t1"]
        assert await memory.reindex_groups(thread_id="t1") == len(t1_groups)
        after = await memory.recall("t1", mode="search", query=QUERY, limit=3)
        assert after.groups and after.groups[0].id in {g.id for g in t1_groups}
        assert "Terraform" in (after.groups[0].snippet or "")
        indexed = await memory.reindex_groups(resource_id="alice")
        assert indexed >= len(t1_groups) + 1  # t2's groups too
        assert await index.count() > 0
    await index.close()


async def test_what_it_refuses(tmp_path: Path) -> None:
    async with memory_for(tmp_path / "m.db", retrieval_config()) as memory:
        await memory.create_thread("t1", "alice")
        with pytest.raises(ConfigError, match="vector retrieval"):
            await memory.reindex_groups(thread_id="t1")
    embedder = LexicalHashEmbedder()
    index = await _index(tmp_path / "v.db", embedder)
    async with memory_for(tmp_path / "m2.db", retrieval_config(vector=True), embedder=embedder,
                          vector_index=index) as memory:  # fmt: skip
        with pytest.raises(ThreadNotFoundError):
            await memory.reindex_groups(thread_id="nope")
        with pytest.raises(InvalidInputError, match="one of them"):
            await memory.reindex_groups()
        with pytest.raises(InvalidInputError, match="one of them"):
            await memory.reindex_groups(thread_id="t1", resource_id="alice")
        assert await memory.reindex_groups(resource_id="nobody") == 0
    await index.close()
