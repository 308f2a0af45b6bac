"""What the knowledge-boundary tests share (the Memory side, test_knowledge_boundary, and the
worker side, test_worker_knowledge_boundary): an e-mail address and an API key said in two turns,
the configuration with or without the privacy boundary, the texts the knowledge store ends up
holding, and the check of them (redacted, or, without the boundary, the positive control)."""

from __future__ import annotations

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.knowledge import Knowledge, RecordView

__all__ = ["EMAIL", "KEY", "boundary_config", "check_stored", "stored_texts", "tell_email_and_key"]

EMAIL = "jane.doe.7731@example.org"
KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"

#: The scopes the knowledge agents capture into for thread t1 of alice.
SCOPES = ("org:default/resource:alice/thread:t1", "org:default/resource:alice")


def boundary_config(privacy: bool, *, buffer_tokens: float | bool) -> MemoryConfig:
    """Observation after a couple of turns, knowledge captured as verified, and the privacy
    boundary (e-mail addresses and secrets redacted) when ``privacy``."""
    return MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": buffer_tokens},
        knowledge={"trust": "verified"},
        privacy=PrivacyConfig(key="k", redact_pii=["email"]) if privacy else None,
    )


async def tell_email_and_key(memory: Memory) -> None:
    """Two turns of thread t1 (resource alice): the e-mail address, then the API key."""
    for text in [f"My email address is {EMAIL}, please use it for invoices.",
                 f"My API key is {KEY} and my favourite colour is teal."]:  # fmt: skip
        turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted.")])


async def _records(knowledge: Knowledge, scope: str) -> list[str]:
    texts: list[str] = []
    for node in (await knowledge.store.list_nodes(scope, limit=1000)).items:
        about = await knowledge.store.list_about(node.id, scope, view=RecordView(), limit=1000)
        texts += [r.text for r in about.items]
    return texts


async def stored_texts(knowledge: Knowledge) -> list[str]:
    """Every record's text in the thread's and the resource's scope."""
    return [text for scope in SCOPES for text in await _records(knowledge, scope)]


def check_stored(texts: list[str], events: list[str], *, privacy: bool, who: str) -> None:
    """With the boundary neither value is stored and a redaction was reported; without it (the
    positive control) the address is stored as said."""
    stored = "\n".join(texts)
    assert texts, f"{who} captured nothing"
    if privacy:
        assert EMAIL not in stored and KEY not in stored, stored
        assert "redaction" in events
    else:
        assert EMAIL in stored
