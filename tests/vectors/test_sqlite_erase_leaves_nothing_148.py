"""A user deleted with ``Memory.delete_resource`` leaves nothing of theirs in the SQLite vector
index's files either.

The README says ``delete_resource`` removes the user's retrieval vectors, and the message and
knowledge stores leave no erased bytes in their files (``secure_delete``, the write-ahead log
truncated after an erase). The vector index deleted its rows, but while the app kept running its
``-wal`` file still held every deleted row (the namespace naming the user and the thread, the
group keys, the vectors) until a checkpoint happened to overwrite it. After the delete the
vector index's files must hold none of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.vectors import SQLiteVectorIndex

from tests.retrieval.helpers import dated_messages, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio

USER = "alice.zebracorn@example.com"


def _held(folder: Path, needle: bytes) -> dict[str, int]:
    return {name: (folder / name).read_bytes().count(needle) for name in sorted(os.listdir(folder))
            if (folder / name).read_bytes().count(needle)}


async def test_delete_resource_leaves_no_vector_row_of_the_user_in_the_files(tmp_path: Path) -> None:
    embedder = LexicalHashEmbedder()
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    index = await SQLiteVectorIndex.open(
        vectors / "v.db", dimensions=embedder.dimensions, space=embedder.name
    )
    memory: Memory = memory_for(tmp_path / "m.db", retrieval_config(vector=True), embedder=embedder,
                                vector_index=index)
    async with memory:
        await replay(memory, "t-zebracorn", USER, dated_messages(80))
        indexed = await index.count()
        keys = [hit.key for hit in await index.search([1.0] * embedder.dimensions, k=3)]
        await memory.delete_resource(USER)
        left = await index.count()
        held = {needle: _held(vectors, needle.encode()) for needle in ("zebracorn", *keys)}
    await index.close()
    assert indexed > 0 and left == 0
    assert held == {needle: {} for needle in held}, held
