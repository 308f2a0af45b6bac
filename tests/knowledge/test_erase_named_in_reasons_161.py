"""Erasing a fact leaves no quote of it in the audit events of the records curation removed for
it (helper-161).

Curation removes the older value of a changed fact with the reason "superseded by <id>: 'phone
number' changed from “…old…” to “…new…”", stored on the older record's ``record-deleted`` event.
Erasing the newer record (``Knowledge.erase``, "no history keeps them"), or deleting the thread it
was captured in when the older value lived at the resource, deleted the events about the newer
record only: the older record's event still quoted the new number in the audit log and the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

NEW = "3381"
THREAD = "org:default/resource:alice/thread:t1"
RESOURCE = "org:default/resource:alice"
CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False}, knowledge={"trust": "verified"})


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    graph = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with graph:
        yield graph


async def _say(memory: Memory, text: str) -> None:
    async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)]) as turn:
        await turn.step([Message.assistant("Noted.")])
    await memory.observe("t1")


async def _quotes(knowledge: Knowledge, tmp_path: Path) -> list[str]:
    found = []
    for scope in (THREAD, RESOURCE):
        page = await knowledge.store.list_activity(scope, limit=1000, threads=True)
        found += [e.reason for e in page.items if NEW in e.reason]
    db = tmp_path / "k.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            found += [doc for (doc,) in conn.execute("SELECT doc FROM knowledge_events") if NEW in doc]
    return found


async def test_erasing_the_new_value_leaves_no_quote_of_it(knowledge: Knowledge, tmp_path: Path) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        await _say(memory, "My phone number is +49 151 5550 7720, put it in my signature please.")
        await _say(memory, "I switched providers, so my number is now +49 176 5550 3381.")
        await memory.settled()
        run = await memory.curate_knowledge("t1")
        assert run.removed and NEW in run.removed[0][1]  # the older value went, its reason quoting the new
        hits = await knowledge.search("phone number providers", THREAD)
        new = [h.record for h in hits if h.record is not None and NEW in h.record.text]
        assert len(new) == 1
        assert await _quotes(knowledge, tmp_path)  # control: quoted before the erase
        await knowledge.erase([new[0].id], THREAD, reason="the user asked")
        assert await _quotes(knowledge, tmp_path) == []
        # the older record's removal is still in the log, by its actor
        events = (await knowledge.store.list_activity(THREAD, limit=1000)).items
        assert [e.actor for e in events if e.subject_id == run.removed[0][0] and e.action.value == "record-deleted"] \
            == ["curate"]


async def test_deleting_the_thread_leaves_no_quote_of_its_value_at_the_resource(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        user = await knowledge.node("User", "person", RESOURCE)
        await knowledge.append(user.id, "their phone number is +49 151 5550 7720", RESOURCE, reason="from the CRM",
                               attribute="phone number", when="2025-01-01")
        await _say(memory, "I switched providers, so my number is now +49 176 5550 3381.")
        await memory.settled()
        run = await memory.curate_knowledge("t1")
        assert run.removed and NEW in run.removed[0][1]
        assert await knowledge.store.get_record(run.removed[0][0], RESOURCE, RecordView()) is None
        assert await _quotes(knowledge, tmp_path)
        await memory.delete_thread("t1")
        assert await _quotes(knowledge, tmp_path) == []
