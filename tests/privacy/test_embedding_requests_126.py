"""What a hosted embedder receives with the privacy boundary on (helper-126's hostile review).

README: "every request the LLM observer and reflector send is redacted" and ``providers`` says
which providers may see which scope. With ``retrieval={"vector": True}`` and
``Memory(embedder=OpenAIEmbedder(...))`` each observation group is embedded by the hosted API,
and a ``mode="search"`` recall embeds the agent's query: neither goes through the boundary. With
the offline observer (a thread the rules keep offline, or no LLM at all) the groups hold the
user's words as said, so the API key below reached the embeddings endpoint in clear (a real
local HTTP server plays OpenAI). Fixed (this was a strict xfail, failing as said): a hosted embedder is wrapped in the privacy
boundary (``obsmem/assembly.py``: redacted texts, the allow-list judged per thread).
"""

from __future__ import annotations

import json

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.embeddings import OpenAIEmbedder
from obsmem.vectors import InMemoryVectorIndex

from tests.embeddings.conftest import FakeOpenAI

pytestmark = pytest.mark.anyio

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


async def test_a_hosted_embedder_never_receives_a_secret_in_clear() -> None:
    server = FakeOpenAI()
    server.thread.start()
    config = MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        retrieval={"enabled": True, "vector": True},
        privacy=PrivacyConfig(key="k"),
    )
    embedder = OpenAIEmbedder("local-embed", dimensions=8, api_key="sk-test", base_url=server.base_url, backoff_s=0.0)
    try:
        async with Memory("memory://", config=config, embedder=embedder,
                          vector_index=InMemoryVectorIndex(8)) as memory:
            for text in [f"My API key is {KEY}, keep it for the deploy script.", "The deploy runs on Friday."]:
                turn = await memory.begin_turn(thread_id="t1", resource_id="ana",
                                               messages=[Message.user(text + " " + "word " * 20)])
                await turn.end([Message.assistant("Noted.")])
            await memory.observe("t1")
            await memory.settled()
            await memory.recall("t1", mode="search", query=f"which key is {KEY}?")
    finally:
        server.server.shutdown()
        server.server.server_close()
    inputs = [json.dumps(r.body) for r in server.requests]
    assert inputs, "the hosted embedder was called"
    assert not [body for body in inputs if KEY in body], f"{len(inputs)} embedding requests"
