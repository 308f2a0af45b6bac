"""The provider allow-list holds for a hosted embedder (vector retrieval), as for the roles.

``providers={"thread:private-*": ["offline"], "*": ["openai"]}`` keeps ``private-1``'s text from
OpenAI: its observation groups must not reach ``/v1/embeddings`` (they are left out of the
vector index), a search recall from it finds nothing by meaning (``strict``: is refused with
``PrivacyError``) and nothing is sent, and another thread of the same user is embedded as before. An embedder of the
application's own is taken as hosted unless it says ``provider = "offline"``. A real local HTTP
server plays OpenAI. On main every group and query of both threads went to the embeddings API.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig, PrivacyError
from obsmem.embeddings import OpenAIEmbedder
from obsmem.vectors import InMemoryVectorIndex

from tests.embeddings.conftest import FakeOpenAI

pytestmark = pytest.mark.anyio

PRIVATE = "Xyzzyitis"
RULES = {"thread:private-*": ["offline"], "*": ["openai"]}


def _config(strict: bool = False) -> MemoryConfig:
    return MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        retrieval={"enabled": True, "vector": True},
        privacy=PrivacyConfig(key="k", providers=RULES, strict=strict),
    )


async def _talk(memory: Memory, thread: str, texts: Sequence[str]) -> None:
    for text in texts:
        turn = await memory.begin_turn(thread_id=thread, resource_id="ana", messages=[Message.user(text + " " + "word " * 20)])
        await turn.end([Message.assistant("Noted.")])
    await memory.observe(thread)
    await memory.settled()


@pytest.mark.parametrize("strict", [False, True])
async def test_a_forbidden_threads_groups_and_queries_never_reach_the_hosted_embedder(strict: bool) -> None:
    server = FakeOpenAI()
    server.thread.start()
    embedder = OpenAIEmbedder("local-embed", dimensions=8, api_key="sk-test", base_url=server.base_url, backoff_s=0.0)
    events: list[Any] = []
    try:
        async with Memory("memory://", config=_config(strict), embedder=embedder, vector_index=InMemoryVectorIndex(8),
                          on_event=events.append) as memory:
            await _talk(memory, "private-1", [f"My doctor says I have {PRIVATE}.", "I take two pills a day."])
            if strict:  # refused, as a strict boundary refuses the roles' requests
                with pytest.raises(PrivacyError):
                    await memory.recall("private-1", mode="search", query=f"what about {PRIVATE}?")
            else:  # nothing sent: the query matches nothing by meaning
                missed = await memory.recall("private-1", mode="search", query=f"what about {PRIVATE}?")
                assert missed.groups == ()
            before = len(server.requests)
            await _talk(memory, "chat-2", ["Let us plan a trip to Lisbon in May.", "We fly on the 3rd."])
            found = await memory.recall("chat-2", mode="search", query="Lisbon trip")
    finally:
        server.server.shutdown()
        server.server.server_close()
    bodies = [json.dumps(r.body) for r in server.requests]
    assert not [body for body in bodies if PRIVATE in body], f"{len(bodies)} embedding requests"
    assert before == 0, "nothing of private-1 (groups or query) was sent"
    # chat-2's groups and its query went to the embedder (the fake's vectors are hashes of the text,
    # so whether the query's nearest group scores above 0 is chance: not asserted)
    assert len(server.requests) >= 2 and found.mode == "search", "chat-2 is embedded as before"
    assert any(e.kind == "privacy-fallback" and e.data.get("role") == "embedding" for e in events) != strict


class OwnEmbedder:
    """An application's embedder that runs in its own process (a local model)."""

    name = "own-local-8"
    dimensions = 8

    def __init__(self, provider: str | None) -> None:
        self.texts: list[str] = []
        if provider is not None:
            self.provider = provider

    async def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        rows = np.ones((len(texts), 8), dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("provider", [None, "offline"])
async def test_an_own_embedder_is_hosted_unless_it_says_offline(provider: str | None) -> None:
    embedder = OwnEmbedder(provider)
    async with Memory("memory://", config=_config(), embedder=embedder, vector_index=InMemoryVectorIndex(8)) as memory:
        await _talk(memory, "private-1", [f"My doctor says I have {PRIVATE} and the token sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z."])
    if provider is None:  # unknown: held to the rules (private-1 is offline only) and redacted
        assert embedder.texts == []
    else:  # in process: it sees the text as it is, as the offline roles do
        assert any(PRIVATE in text for text in embedder.texts)
