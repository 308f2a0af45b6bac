"""Curating Alice's thread t1 removes her resource's old home city because of t1's newer one;
her thread t2 reads that removal without learning of t1's record, and deleting t1 leaves no link
to it behind (helper-185; the reasons' text: tests/knowledge/test_sibling_thread_audit_183.py).

Before: t2's reads of the removed record (get, as_of history, search, export) carried
``superseded_by`` = the id of t1's record, and as history its validity ended at t1's fact date;
list_superseded_by(<t1 id>) answered t2; t2's audit log named t1's record ("superseded by
<id>: …") and the event holding the full reason in t1 (``details["reason_event"]``). After t1
was deleted, the removed record still named the deleted record, the resource's event named the
deleted event, and its reason (naming the deleted id) was withheld as naming an erased record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                      knowledge={"trust": "verified"})
RESOURCE = "org:default/resource:alice"
T1 = f"{RESOURCE}/thread:t1"
T2 = f"{RESOURCE}/thread:t2"
EVERYTHING = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
FEBRUARY = datetime(2025, 2, 1, tzinfo=UTC)


async def _curated(memory: Memory, knowledge: Knowledge) -> tuple[str, str]:
    for thread in ("t1", "t2"):
        hello = [Message.user("hello")]
        async with memory.turn(thread_id=thread, resource_id="alice", messages=hello) as turn:
            await turn.step([Message.assistant("Hi.")])
    user = await knowledge.node("User", "person", RESOURCE)
    old = await knowledge.append(user.id, "their home city is Munich", RESOURCE, reason="from the CRM",
                                 attribute="home city", when="2025-01-01")
    new = await knowledge.append(user.id, "their home city is Hamburg", T1, reason="said",
                                 attribute="home city", when="2025-03-01", source_thread_id="t1")
    run = await memory.curate_knowledge("t1")
    assert [r for r, _ in run.removed] == [old.id]
    return old.id, new.id


async def test_t2_reads_the_removal_without_t1s_record(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, new = await _curated(memory, knowledge)
        store = knowledge.store
        removed = await store.get_record(old, T2, EVERYTHING)
        assert removed is not None and removed.deleted_at is not None
        assert removed.superseded_by is None
        # no history dated by t1's record: its fact time is t1's to know
        assert await store.get_record(old, T2, RecordView(as_of=FEBRUARY)) is None
        now = datetime.now(UTC)
        assert await store.get_record(old, T2, RecordView(as_of=FEBRUARY, as_known_at=now)) is None
        known_before = await store.get_record(old, T2, RecordView(as_known_at=removed.captured_at))
        assert known_before is not None and known_before.superseded_by is None
        hits = [h.record for h in await store.search_lexical("Munich", T2, view=EVERYTHING) if h.record]
        assert [(r.id, r.superseded_by) for r in hits] == [(old, None)]
        served = [h.record for h in await knowledge.search("Munich", T2, view=EVERYTHING) if h.record]
        assert served and all(r.superseded_by is None for r in served)
        assert (await store.list_superseded_by(new, T2, view=EVERYTHING)).items == []
        # t2's audit log and export name nothing of t1's
        events = (await store.list_activity(T2, limit=1000)).items
        assert [e for e in events if new in f"{e.reason} {e.details}"] == []
        assert [e for e in events if "reason_event" in e.details] == []
        assert [e.reason for e in events if e.subject_id == old and e.action.value == "record-deleted"] == [
            "superseded by a record of a narrower scope: 'home city' changed from "
            "“their home city is Munich” (the rest is in that scope's log)"
        ]
        dump = await store.dump_scope(T2)
        assert new not in repr(dump)
        assert [e for e in dump.events if "reason_event" in e.details] == []


async def test_t1_keeps_the_history_and_the_link(knowledge: Knowledge) -> None:
    """Control: t1 sees its own record, so the removal is history there, as before."""
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, new = await _curated(memory, knowledge)
        store = knowledge.store
        history = await store.get_record(old, T1, RecordView(as_of=FEBRUARY))
        assert history is not None and history.superseded_by == new
        assert history.valid_until == datetime(2025, 3, 1, tzinfo=UTC)
        assert [r.id for r in (await store.list_superseded_by(new, T1, view=EVERYTHING)).items] == [old]
        full = [e for e in (await store.list_activity(RESOURCE, limit=1000, threads=True)).items
                if e.subject_id == old and e.action.value == "record-deleted"]
        linked = [e.details["reason_event"] for e in full if "reason_event" in e.details]
        assert len(full) == 2 and linked and linked[0] in {e.id for e in full}
        # the resource's own log (not its threads') does not reach t1's event: no link to it
        own = (await store.list_activity(RESOURCE, limit=1000)).items
        assert [e for e in own if "reason_event" in e.details] == []


async def test_deleting_t1_leaves_no_link_to_its_rows(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, new = await _curated(memory, knowledge)
        store = knowledge.store
        linked = {e.details["reason_event"] for e in (await store.list_activity(T1, limit=1000)).items
                  if "reason_event" in e.details}
        t1_events = {e.id for e in (await store.list_activity(T1, limit=1000)).items if e.scope == T1}
        assert linked and linked <= t1_events
        await memory.delete_thread("t1")
        stored = await store.load_record(old)
        assert stored is not None and stored.deleted_at is not None and stored.superseded_by is None
        dump = await store.dump_scope(RESOURCE)
        assert not [x for x in [new, *t1_events] if x in repr(dump)]
        removal = [e for e in dump.events if e.subject_id == old and e.action.value == "record-deleted"]
        assert len(removal) == 1 and "Munich" in removal[0].reason  # its words stay, nothing withheld
        assert await store.get_record(old, RESOURCE, RecordView(as_of=FEBRUARY)) is None


async def test_t2s_export_restores_into_the_same_store(knowledge: Knowledge) -> None:
    """Control: t2's export shows the resource's rows without t1's links, and restoring it after
    t2 is purged takes those rows as the ones stored (no conflict)."""
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, _ = await _curated(memory, knowledge)
        store = knowledge.store
        user = await knowledge.node("User", "person", RESOURCE)
        await knowledge.append(user.id, "they like tea", T2, reason="said", source_thread_id="t2")
        dump = await store.dump_scope(T2)
        await store.purge_scope(T2, actor="admin", reason="moved")
        counts = await store.restore_dump(dump, subtree=T2)
        assert counts["records"] == 1
        assert (await store.get_record(old, T1, RecordView(as_of=FEBRUARY))) is not None
