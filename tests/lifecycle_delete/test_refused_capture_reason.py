"""A capture refused because its text holds a forgotten value must not keep that value in the
refusal's audit event.

The capture agent's reason quotes what the user said ("The user stated it: “their locker code is
…”."). After ``memory.forget(value)`` the user says the value again; the next capture of it is
refused as tombstoned, and the ``write-refused`` event is logged with the caller's reason: the
value came back into the knowledge store's audit log, which the README promises shows
``[forgotten value]`` instead of the text.

On main: ``AssertionError: the refusal's audit event holds the forgotten value:
['knowledge_events: ...{"action":"write-refused",...,"reason":"The user stated it: “their locker
code is ZEBRAQUUX42”."...']``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import ActivityAction
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import SQLiteStore

from .scan import scan_knowledge

pytestmark = pytest.mark.anyio

SECRET = "ZEBRAQUUX42"


async def test_a_refused_capture_of_a_forgotten_value_does_not_audit_the_value(tmp_path: Path) -> None:
    kstore = SQLiteKnowledgeStore(tmp_path / "knowledge.db")
    config = MemoryConfig(
        observation={"message_tokens": 100_000, "buffer_tokens": False},
        reflection={"observation_tokens": 100_000},
        knowledge={"trust": "verified"},
    )
    async with SQLiteStore(tmp_path / "memory.db") as store, kstore:
        memory = Memory(store, config=config, knowledge=Knowledge(kstore))

        async def say(text: str) -> None:
            async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)]) as turn:
                await turn.step([Message.assistant("Noted.")])
            await memory.observe("t1")
            await memory.settled()

        await say(f"My locker code is {SECRET}.")
        assert scan_knowledge(kstore, SECRET)  # captured
        await memory.forget(SECRET)
        assert scan_knowledge(kstore, SECRET) == []

        await say(f"My locker code is {SECRET}.")  # said again: the capture is refused
        events = (await kstore.list_activity("org:default/resource:alice/thread:t1", limit=100)).items
        refused = [e for e in events if e.action is ActivityAction.WRITE_REFUSED]
        assert refused and all(e.details["refusal"] == "tombstoned" for e in refused)
        leftovers = scan_knowledge(kstore, SECRET)
        assert leftovers == [], f"the refusal's audit event holds the forgotten value: {leftovers}"
        assert all(e.actor == "capture" and "forgotten value" in e.reason for e in refused)
        await memory.aclose()
