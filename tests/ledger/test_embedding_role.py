"""The cost ledger books an embedding call under the role ``embedding``, not under the memory
work it happened in: indexing the observation groups an observation wrote is no observer call.

Seen from the user's side: ``usage(...).by("role")`` counts under ``observer`` exactly the observer
model's calls, and the embedder's calls under ``embedding``, still for the thread and resource they
were made for (per-thread and per-resource usage, and the per-resource budget, stay right)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.models.base import ModelResponse, Usage
from obsmem.models.testing import FunctionModel
from obsmem.vectors import SQLiteVectorIndex

pytestmark = pytest.mark.anyio

OBSERVATIONS = "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User plans the garden.\n</observations>"


@pytest.mark.parametrize("observation", [
    pytest.param({"message_tokens": 200, "buffer_tokens": False}, id="synchronous"),
    pytest.param({"message_tokens": 200}, id="buffered"),
])
async def test_embedding_calls_are_booked_under_their_own_role(tmp_path: Path, observation: dict[str, Any]) -> None:
    invoked: list[int] = []

    def observer(messages: object, settings: object) -> ModelResponse:
        invoked.append(1)
        return ModelResponse(OBSERVATIONS, usage=Usage(input_tokens=1000, output_tokens=50))

    embedder = LexicalHashEmbedder()
    config = MemoryConfig(observation=observation, retrieval={"enabled": True, "vector": True})
    async with Memory(
        f"sqlite:///{tmp_path / 'm.db'}", config=config,
        observer=FunctionModel(observer, name="openai:gpt-4o-mini"),
        embedder=embedder, vector_index=SQLiteVectorIndex(tmp_path / "v.db", dimensions=embedder.dimensions),
    ) as memory:
        for i in range(12):
            turn = await memory.begin_turn(
                thread_id="t1", resource_id="alice",
                messages=[Message.user(f"Question {i} about the garden beds and tomatoes?")],
            )
            await turn.end([Message.assistant(f"Answer {i}: beans next to the tomatoes.")])
        await memory.settled()
        by_thread = await memory.usage(thread_id="t1")
        by_resource = await memory.usage(resource_id="alice")
        everything = await memory.usage()

    assert invoked, "the observer model was never called"
    for report in (by_thread, by_resource, everything):
        roles = {row.role: row.calls for row in report.by("role")}
        assert roles.get("observer") == len(invoked), report.rows
        assert roles.get("embedding", 0) > 0, report.rows
        assert {(row.role, row.model) for row in report.rows} == {
            ("observer", "openai:gpt-4o-mini"), ("embedding", embedder.name)}
        # the per-role totals add up to the whole
        assert sum(row.calls for row in report.by("role")) == report.total().calls
    # every call, the embedder's too, is for this thread and resource
    assert by_thread.total() == by_resource.total() == everything.total()
