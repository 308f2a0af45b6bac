"""The privacy boundary holds before the knowledge store: what the knowledge agents capture from
observations, and what a user pins, is redacted with the same placeholders as model requests."""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

EMAIL = "jane.doe.7731@example.org"
KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


async def _records(knowledge: Knowledge, scope: str) -> list[str]:
    texts: list[str] = []
    for node in (await knowledge.store.list_nodes(scope, limit=1000)).items:
        texts += [r.text for r in (await knowledge.store.list_about(node.id, scope, view=RecordView(), limit=1000)).items]
    return texts


@pytest.mark.parametrize("privacy", [True, False])
async def test_captured_and_pinned_text_is_redacted_before_the_knowledge_store(privacy: bool) -> None:
    config = MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        knowledge={"trust": "verified"},
        privacy=PrivacyConfig(key="k", redact_pii=["email"]) if privacy else None,
    )
    events: list[str] = []
    async with Knowledge.in_memory() as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge,
                          on_event=lambda e: events.append(e.kind)) as memory:
            for text in [f"My email address is {EMAIL}, please use it for invoices.",
                         f"My API key is {KEY} and my favourite colour is teal."]:
                turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)])
                await turn.end([Message.assistant("Noted.")])
            await memory.observe("t1")
            await memory.settled()
            await memory.pin("t1", f"Always send invoices to {EMAIL}.")
        texts = await _records(knowledge, "org:default/resource:alice/thread:t1")
        texts += await _records(knowledge, "org:default/resource:alice")
    stored = "\n".join(texts)
    assert texts, "the agents captured nothing"
    if privacy:
        assert EMAIL not in stored and KEY not in stored, stored
        assert "redaction" in events
    else:  # the positive control: without the boundary the values are stored as said
        assert EMAIL in stored
