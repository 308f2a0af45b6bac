"""Curating one thread may remove a record of its resource because of the thread's own record (a
newer home city closes the resource's old one), but the removal's reason at the resource scope
names nothing of the thread's text: a sibling thread reads that scope's audit log (list_activity,
REST /api/knowledge/audit) and exports it. The thread's own log keeps the full reason (helper-183).

Before, the reason logged at the resource quoted the thread's record ('superseded by …: changed
from “Munich” to “… my therapist Dr. Qvist”'), so thread t2 read what Alice said in thread t1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False}, knowledge={"trust": "verified"})
RESOURCE = "org:default/resource:alice"
T1 = f"{RESOURCE}/thread:t1"
T2 = f"{RESOURCE}/thread:t2"
SECRET = "Qvist"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    graph = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with graph:
        yield graph


async def _reasons(knowledge: Knowledge, scope: str, *, threads: bool = False) -> list[str]:
    page = await knowledge.store.list_activity(scope, limit=1000, threads=threads)
    return [e.reason for e in page.items]


async def _seen_by_t2(knowledge: Knowledge) -> list[str]:
    """Every reason and text thread t2 can read: its audit log, its export, the removed record."""
    found = [r for r in await _reasons(knowledge, T2) if SECRET in r]
    dump = await knowledge.store.dump_scope(T2)
    found += [e.reason for e in dump.events if SECRET in e.reason or SECRET in str(e.details)]
    found += [r.text for r in dump.records if SECRET in r.text or SECRET in str(r.metadata)]
    return found


async def _setup(memory: Memory, knowledge: Knowledge, later: str, **extra: str) -> tuple[str, str]:
    async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
        await turn.step([Message.assistant("Hi.")])
    user = await knowledge.node("User", "person", RESOURCE)
    old = await knowledge.append(user.id, "their home city is Munich", RESOURCE, reason="from the CRM",
                                 attribute="home city", when="2025-01-01")
    new = await knowledge.append(user.id, later, T1, reason="said", when="2025-03-01", source_thread_id="t1",
                                 **extra)
    return old.id, new.id


async def test_t2_does_not_read_t1s_text_when_its_value_supersedes_the_resources(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, _ = await _setup(memory, knowledge, f"their home city is Hamburg, near my therapist Dr. {SECRET}",
                              attribute="home city")
        run = await memory.curate_knowledge("t1")
        # the removal stands: the user's newer value closes the resource's old one in every thread
        assert [r for r, _ in run.removed] == [old]
        assert await knowledge.store.get_record(old, T2, RecordView()) is None
        assert await _seen_by_t2(knowledge) == []
        # t2's log still says what went and why, in words of its own scope
        shown = [r for r in await _reasons(knowledge, T2) if r.startswith("superseded by")]
        assert len(shown) == 1 and "Munich" in shown[0]
        # t1 (and the resource's view of its threads) keeps the full reason
        assert any(SECRET in r for r in await _reasons(knowledge, T1))
        assert any(SECRET in r for r in await _reasons(knowledge, RESOURCE, threads=True))
        assert not any(SECRET in r for r in await _reasons(knowledge, RESOURCE))


async def test_t2_does_not_read_t1s_text_when_it_makes_a_resource_plan_stale(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
            await turn.step([Message.assistant("Hi.")])
        user = await knowledge.node("User", "person", RESOURCE)
        plan = await knowledge.append(user.id, "they will renew the passport appointment next week", RESOURCE,
                                      reason="from the CRM", when="2025-01-01")
        await knowledge.append(user.id, f"the passport appointment renewal is done, Dr. {SECRET} signed the form",
                               T1, reason="said", when="2025-03-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert [r for r, _ in run.removed] == [plan.id]
        assert await _seen_by_t2(knowledge) == []
        assert any(SECRET in r for r in await _reasons(knowledge, T1))


async def test_t2_does_not_read_t1s_text_of_a_near_duplicate(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
            await turn.step([Message.assistant("Hi.")])
        user = await knowledge.node("User", "person", RESOURCE)
        short = await knowledge.append(user.id, "they collect rare Leica cameras from flea markets", RESOURCE,
                                       reason="from the CRM", when="2025-01-01")
        await knowledge.append(user.id, f"they collect vintage Leica cameras from flea markets with their friend {SECRET}",
                               T1, reason="said", when="2025-03-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert [r for r, _ in run.removed] == [short.id]
        assert await _seen_by_t2(knowledge) == []
        assert any(SECRET in r for r in await _reasons(knowledge, T1))


async def test_erasing_the_removed_record_leaves_no_quote_of_it_in_the_threads_log(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, _ = await _setup(memory, knowledge, f"their home city is Hamburg, near my therapist Dr. {SECRET}",
                              attribute="home city")
        await memory.curate_knowledge("t1")
        await knowledge.erase([old], RESOURCE, reason="the user asked")
        for scope in (T1, T2, RESOURCE):
            assert [r for r in await _reasons(knowledge, scope, threads=True) if "Munich" in r] == []


async def test_same_scope_removal_is_logged_once_as_before(knowledge: Knowledge) -> None:
    """Control: both records at the resource: one event, the full reason, unchanged."""
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
            await turn.step([Message.assistant("Hi.")])
        user = await knowledge.node("User", "person", RESOURCE)
        old = await knowledge.append(user.id, "their home city is Munich", RESOURCE, reason="from the CRM",
                                     attribute="home city", when="2025-01-01")
        await knowledge.append(user.id, "their home city is Hamburg", RESOURCE, reason="said",
                               attribute="home city", when="2025-03-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert [r for r, _ in run.removed] == [old.id]
        page = await knowledge.store.list_activity(T2, limit=1000)
        removals = [e for e in page.items if e.subject_id == old.id and e.action.value == "record-deleted"]
        assert len(removals) == 1 and "Hamburg" in removals[0].reason


async def test_deleting_the_thread_leaves_the_removal_in_the_resources_log(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        old, _ = await _setup(memory, knowledge, f"their home city is Hamburg, near my therapist Dr. {SECRET}",
                              attribute="home city")
        await memory.curate_knowledge("t1")
        await memory.delete_thread("t1")
        for scope in (T2, RESOURCE):
            reasons = await _reasons(knowledge, scope, threads=True)
            assert [r for r in reasons if SECRET in r] == []
        page = await knowledge.store.list_activity(RESOURCE, limit=1000, threads=True)
        assert [e.actor for e in page.items if e.subject_id == old and e.action.value == "record-deleted"] \
            == ["curate"]


@pytest.mark.parametrize("where", [RESOURCE, T2, "org:default", "not a scope"])
async def test_reason_within_must_be_below_the_record_on_the_acting_chain(knowledge: Knowledge, where: str) -> None:
    user = await knowledge.node("User", "person", RESOURCE)
    old = await knowledge.append(user.id, "their home city is Munich", RESOURCE, reason="from the CRM")
    with pytest.raises(InvalidInputError):
        await knowledge.store.remove_record(old.id, T1, actor="curate", reason="gone",
                                            reason_within=(where, "the full reason"))
    assert await knowledge.store.get_record(old.id, T1, RecordView()) is not None
    assert [e for e in (await knowledge.store.list_activity(RESOURCE, limit=100, threads=True)).items
            if e.action.value == "record-deleted"] == []
