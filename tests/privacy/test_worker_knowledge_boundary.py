"""``obsmem worker --knowledge`` holds the privacy boundary too (issue 14): a Memory in queue mode
hands its knowledge work to a worker, and what the worker's agents capture is redacted before the
knowledge store exactly as in the application (the Memory-side test is test_knowledge_boundary)."""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.knowledge import Knowledge
from obsmem.storage import MemoryStore
from obsmem.worker import Worker

from .test_knowledge_boundary import EMAIL, KEY, _records

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("privacy", [True, False])
async def test_the_worker_redacts_what_its_agents_capture(privacy: bool) -> None:
    config = MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": 0.5},
        knowledge={"trust": "verified"},
        privacy=PrivacyConfig(key="k", redact_pii=["email"]) if privacy else None,
    )
    events: list[str] = []
    store = MemoryStore()
    async with Knowledge.in_memory() as knowledge:
        async with Memory(store, config=config, knowledge=knowledge, background="queue") as memory:
            for text in [f"My email address is {EMAIL}, please use it for invoices.",
                         f"My API key is {KEY} and my favourite colour is teal."]:
                turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)])
                await turn.end([Message.assistant("Noted.")])
            await memory.observe("t1")
            await memory.settled()
            assert [item.kind for item in await store.list_work("knowledge")] == ["knowledge"]
            worker = Worker(store, config=config, knowledge=knowledge, poll_interval_s=0.01,
                            on_event=lambda e: events.append(e.kind))
            await worker.run(exit_when_idle=True)
        texts = await _records(knowledge, "org:default/resource:alice/thread:t1")
        texts += await _records(knowledge, "org:default/resource:alice")
    stored = "\n".join(texts)
    assert texts, "the worker's agents captured nothing"
    if privacy:
        assert EMAIL not in stored and KEY not in stored, stored
        assert "redaction" in events
    else:  # the positive control: without the boundary the values are stored as said
        assert EMAIL in stored
