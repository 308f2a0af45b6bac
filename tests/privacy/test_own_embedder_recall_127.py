"""With a provider allow-list and an embedder of the application's own (an in-process model that
does not say ``provider = "offline"``), every search recall now fails with PrivacyError, in every
thread, though the boundary is not strict (helper-127's hostile review of bb1b0e0).

PrivacyConfig's contract (config.py): a request whose model is not allowed goes to the offline
model instead, or, *with strict*, fails with PrivacyError. bb1b0e0's guarded embedder raises
PrivacyError whatever ``strict`` says, and takes an own embedder as hosted ('unknown'), which no
rule naming real providers allows; README says nothing of ``provider = "offline"``. Before
bb1b0e0 the same recall answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.vectors import InMemoryVectorIndex

pytestmark = pytest.mark.anyio


class OwnLocalEmbedder:
    """An application's own in-process embedder, written to the Embedder protocol (name, dimensions, embed)."""

    name = "own-local-8"
    dimensions = 8

    async def embed(self, texts: Sequence[str]) -> Any:
        rows = np.ones((len(texts), 8), dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def test_a_search_recall_with_an_own_embedder_answers_under_a_non_strict_allow_list() -> None:
    config = MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        retrieval={"enabled": True, "vector": True},
        privacy=PrivacyConfig(key="k", providers={"*": ["openai"]}),  # strict=False: the default
    )
    async with Memory("memory://", config=config, embedder=OwnLocalEmbedder(),
                      vector_index=InMemoryVectorIndex(8)) as memory:  # fmt: skip
        for text in ("Let us plan a trip to Lisbon in May.", "We fly on the 3rd."):
            turn = await memory.begin_turn(thread_id="chat-2", resource_id="ana",
                                           messages=[Message.user(text + " " + "word " * 20)])  # fmt: skip
            await turn.end([Message.assistant("Noted.")])
        await memory.observe("chat-2")
        await memory.settled()
        await memory.recall("chat-2", mode="search", query="Lisbon trip")  # PrivacyError now
