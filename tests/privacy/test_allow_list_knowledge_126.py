"""The provider allow-list holds for the LLM knowledge agents too (helper-126's hostile review).

README: "providers says which providers may see which scope"; a forbidden scope is observed by
the offline rules. With ``knowledge.model="openai:…"`` the capture agent reads each observation
delta through the same redacting wrapper as the roles, but nothing checks the allow-list for it:
the offline observation of ``private-1`` (a thread the rules keep offline) was sent to OpenAI
by the capture agent. A real local HTTP server plays OpenAI. Fixed (this was a
strict xfail, failing as said): a forbidden scope is read by the offline agents, as the roles'
requests go to the offline roles (``KnowledgeAgents(hosted_for=...)``, wired in assembly.py).
"""

from __future__ import annotations

import json

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.knowledge import Knowledge

from tests.models.wire_server import MemoryModelPlayer, WireServer

pytestmark = pytest.mark.anyio

PRIVATE = "Xyzzyitis"


async def test_the_capture_agent_never_sends_a_forbidden_threads_observations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = WireServer().__enter__()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.responder = MemoryModelPlayer()
    config = MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        knowledge={"trust": "verified", "model": "openai:gpt-4o-mini"},
        privacy=PrivacyConfig(key="k", providers={"thread:private-*": ["offline"], "*": ["openai"]}),
    )
    try:
        async with Knowledge.in_memory() as knowledge:
            async with Memory("memory://", config=config, knowledge=knowledge) as memory:
                for text in [f"My doctor says I have {PRIVATE}.", "I take two pills a day for it, every morning."]:
                    turn = await memory.begin_turn(thread_id="private-1", resource_id="ana",
                                                   messages=[Message.user(text + " " + "word " * 20)])
                    await turn.end([Message.assistant("Noted.")])
                await memory.observe("private-1")
                await memory.settled()
                record = await memory.get_record("private-1")
                private_requests = len(server.requests)
                for text in ["We plan a trip to Lisbon in May.", "We fly on the third, back on the tenth."]:
                    turn = await memory.begin_turn(thread_id="chat-2", resource_id="ana",
                                                   messages=[Message.user(text + " " + "word " * 20)])
                    await turn.end([Message.assistant("Noted.")])
                await memory.observe("chat-2")
                await memory.settled()
    finally:
        server.__exit__()
    assert record is not None and PRIVATE in record.active_observations, "observed by the offline rules"
    sent = [json.dumps(r.body) for r in server.requests]
    assert not [body for body in sent if PRIVATE in body], f"{len(sent)} requests"
    assert private_requests < len(sent), "chat-2, which the rules allow, still goes to the hosted model"
