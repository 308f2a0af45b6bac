"""Embedding calls reach the cost ledger too (issue 18): a Memory with vector retrieval records
its embedder's calls (indexing observation groups, and a recall search under role ``recall``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.embeddings import LexicalHashEmbedder
from obsmem.vectors import InMemoryVectorIndex

from ..retrieval.helpers import dated_messages, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio


async def test_the_embedders_calls_are_in_the_ledger(tmp_path: Path) -> None:
    embedder = LexicalHashEmbedder()
    index = InMemoryVectorIndex(embedder.dimensions, space=embedder.name)
    memory = memory_for(tmp_path / "m.db", retrieval_config(vector=True), embedder=embedder, vector_index=index)
    async with memory:
        await replay(memory, "t1", "alice", dated_messages(80))
        indexed = [r for r in (await memory.usage(resource_id="alice")).rows if r.model == embedder.name]
        assert indexed and sum(r.calls for r in indexed) > 0 and sum(r.input_tokens for r in indexed) > 0
        await memory.recall("t1", mode="search", query="Terraform billing service deploy", limit=3)
        recalls = [r for r in (await memory.usage(thread_id="t1")).rows if r.role == "recall"]
    assert [(r.model, r.calls, r.failed) for r in recalls] == [(embedder.name, 1, 0)]
    assert recalls[0].unpriced_calls == 1  # a local embedder has no price
