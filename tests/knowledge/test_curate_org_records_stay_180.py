"""Curation acting for one user's thread must not take an org-wide record out of every other
user's reads because of what that user said, nor quote it in the org's audit log.

An application stores a shared fact for the whole organisation (``org:default``): a plan, an
office city. Alice says in her thread that the plan is done, or that the city changed, possibly
with something private beside it. Curation of her thread removed the org's record (a stale plan,
a superseded value) because of her thread record: Bob's reads lost the org fact, with nothing
in its place he can see, and the removal's reason, logged at the org scope where his key reads
the audit log, quoted Alice's thread-private text (here a salary). Within one resource (a
thread's record closing the resource's older value) curation works as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ORG = "org:default"
ALICE = "org:default/resource:alice"
ALICE_T1 = "org:default/resource:alice/thread:t1"
BOB = "org:default/resource:bob"
BOB_T1 = "org:default/resource:bob/thread:b1"
PRIVATE = "91000 EUR"
CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False}, knowledge={"trust": "verified"})


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Knowledge]:
    graph = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with graph:
        yield graph


async def _start(memory: Memory) -> None:
    async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hello")]) as turn:
        await turn.step([Message.assistant("Hi.")])


async def _bob_audit_quotes(knowledge: Knowledge) -> list[str]:
    page = await knowledge.store.list_activity(BOB, limit=1000, threads=True)
    return [e.reason for e in page.items if PRIVATE in e.reason or "Hamburg" in e.reason]


@pytest.mark.parametrize("where", [ALICE_T1, ALICE])
async def test_alices_record_does_not_remove_the_orgs_plan(knowledge: Knowledge, where: str) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        await _start(memory)
        acme = await knowledge.node("Acme", "organization", ORG)
        plan = await knowledge.append(acme.id, "The team will move the office to the Berlin campus in March", ORG,
                                      reason="from the intranet", when="2025-01-01")
        await knowledge.append(acme.id, f"The team moved the office to the Berlin campus, done: my salary is {PRIVATE}",
                               where, reason="said", when="2025-02-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert plan.id not in [r for r, _ in run.removed]
        assert await knowledge.store.get_record(plan.id, BOB_T1) is not None  # Bob still has the org's plan
        assert await _bob_audit_quotes(knowledge) == []


async def test_alices_value_does_not_supersede_the_orgs(knowledge: Knowledge) -> None:
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        await _start(memory)
        acme = await knowledge.node("Acme", "organization", ORG)
        city = await knowledge.append(acme.id, "Acme's office city is Munich", ORG, reason="from the intranet",
                                      attribute="office city", when="2025-01-01")
        await knowledge.append(acme.id, "Acme's office city is Hamburg, I heard", ALICE_T1, reason="said",
                               attribute="office city", when="2025-03-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert city.id not in [r for r, _ in run.removed]
        assert await knowledge.store.get_record(city.id, BOB_T1) is not None
        assert await _bob_audit_quotes(knowledge) == []


async def test_an_org_record_still_closes_an_older_org_value(knowledge: Knowledge) -> None:
    """Control: a keeper every reader of the old value sees still removes it."""
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        await _start(memory)
        acme = await knowledge.node("Acme", "organization", ORG)
        city = await knowledge.append(acme.id, "Acme's office city is Munich", ORG, reason="from the intranet",
                                      attribute="office city", when="2025-01-01")
        await knowledge.append(acme.id, "Acme's office city is Hamburg now", ORG, reason="said for everyone",
                               attribute="office city", when="2025-03-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert city.id in [r for r, _ in run.removed]
        assert await knowledge.store.get_record(city.id, BOB_T1) is None


async def test_a_threads_value_still_supersedes_its_resources(knowledge: Knowledge) -> None:
    """Control: within one user's resource a thread's newer value closes the resource's."""
    async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        await _start(memory)
        user = await knowledge.node("User", "person", ALICE)
        old = await knowledge.append(user.id, "their home city is Munich", ALICE, reason="from the CRM",
                                     attribute="home city", when="2025-01-01")
        await knowledge.append(user.id, "their home city is Hamburg", ALICE_T1, reason="said",
                               attribute="home city", when="2025-03-01", source_thread_id="t1")
        run = await memory.curate_knowledge("t1")
        assert old.id in [r for r, _ in run.removed]
