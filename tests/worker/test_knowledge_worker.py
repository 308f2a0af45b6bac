"""``obsmem worker`` and knowledge: an idle resource still gets curated, on a timer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, MemoryConfig, Message
from obsmem.cli import app
from obsmem.clock import FakeClock
from obsmem.config import KnowledgeConfig
from obsmem.knowledge import Knowledge, RecordView
from obsmem.knowledge.agents.curate import CurateAgent
from obsmem.storage import MemoryStore
from obsmem.worker import Worker



def config() -> MemoryConfig:
    return MemoryConfig(
        observation={"message_tokens": 120, "buffer_tokens": False},
        reflection={"observation_tokens": 100_000},
        knowledge=KnowledgeConfig(curate_after_records=1000, curate_max_age_s=600, curate_interval_s=60),
    )


@pytest.mark.anyio
async def test_the_worker_curates_an_idle_resource_when_its_age_trigger_fires(anyio_backend: str) -> None:
    clock = FakeClock()
    store = MemoryStore()
    knowledge = Knowledge.in_memory(clock=clock)
    async with Memory(store, config=config(), knowledge=knowledge, clock=clock) as memory:
        for text in ["My phone number is +49 151 5550 7720.", "My number is now +49 176 5550 3381 instead."]:
            async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)]) as turn:
                await turn.step([Message.assistant("Noted.")])
            await memory.observe("t1")  # committed: capture runs (a background task of the memory)
            await memory.settled()
    # The conversation is over: nobody will reflect or observe this thread again.
    worker = Worker(store, config=config(), knowledge=knowledge, clock=clock, poll_interval_s=0.01)
    stats = await worker.run(exit_when_idle=True)
    assert stats.curations == 0  # not due yet: nothing has waited 600 s
    lane = await memory.knowledge_agents.lanes.read(CurateAgent.lane("t1")) if memory.knowledge_agents else None
    assert lane is not None and lane.cursor is None
    clock.advance(30)
    assert await worker.curate_when_idle() == []  # the idle timer ticks every 60 s, not on every poll
    clock.advance(600)
    runs = await worker.curate_when_idle()
    assert [run.status for run in runs] == ["ran"]
    stats = await worker.run(exit_when_idle=True)
    user = await knowledge.store.resolve_node("User", "org:default/resource:alice/thread:t1")
    assert user is not None
    live = (await knowledge.store.list_about(user.id, "org:default/resource:alice/thread:t1",
                                             view=RecordView(include_candidates=True))).items
    numbers = [r.text for r in live if "5550" in r.text]
    assert len(numbers) == 1 and "3381" in numbers[0]


def test_the_worker_command_takes_a_knowledge_store(tmp_path: Path) -> None:
    db = tmp_path / "main.db"
    graph = tmp_path / "knowledge.db"

    async def application() -> None:
        async with Memory(f"sqlite:///{db}", config=config(), knowledge=Knowledge.sqlite(graph)) as memory:
            async with memory.turn(thread_id="t1", resource_id="alice",
                                   messages=[Message.user("My phone number is +49 151 5550 7720.")]) as turn:
                await turn.step([Message.assistant("Noted.")])
            await memory.observe("t1")
            await memory.settled()
            assert memory.knowledge is not None
            await memory.knowledge.close()

    asyncio.run(application())
    result = CliRunner().invoke(app, ["worker", "--store", f"sqlite:///{db}", "--knowledge", str(graph),
                                      "--exit-when-idle", "--poll", "0.01"])
    assert result.exit_code == 0, result.output
    assert "0 curations" in result.output  # registered, but not due: the age trigger is 600 s


@pytest.mark.anyio
async def test_in_queue_mode_the_agents_run_on_workers(anyio_backend: str) -> None:
    store = MemoryStore()
    knowledge = Knowledge.in_memory()
    queued = MemoryConfig(observation={"message_tokens": 200, "buffer_tokens": 0.25},
                          reflection={"observation_tokens": 100_000})
    facts = ["I work as a Senior Backend Engineer at Tessera Logistics in Munich, by the way.",
             "My phone number is +49 151 5550 7720, please put it in the email signature.",
             "We have a beagle called Kiwi, she is very good with our daughter Ida."] * 3
    worker = Worker(store, config=queued, knowledge=knowledge, poll_interval_s=0.01)
    assert "knowledge" in worker.kinds
    async with Memory(store, config=queued, knowledge=knowledge, background="queue") as memory:
        for text in facts:
            async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)]) as turn:
                await turn.step([Message.assistant("Noted, I will keep that in mind for later.")])
            await memory.settled()
            await worker.run(exit_when_idle=True)
        await memory.observe("t1")
        await memory.settled()
        assert memory.knowledge_agents is not None
        assert [run for run in memory.knowledge_agents.runs if run.agent == "capture"] == []  # not here
    assert any(item.kind == "knowledge" for item in await store.list_work()) or worker.stats.completed
    await worker.run(exit_when_idle=True)
    assert await store.list_work("knowledge") == []
    user = await knowledge.store.resolve_node("User", "org:default/resource:alice/thread:t1")
    assert user is not None
    records = (await knowledge.store.list_about(user.id, "org:default/resource:alice/thread:t1",
                                                view=RecordView(include_candidates=True))).items
    assert any("Tessera Logistics" in r.text for r in records)


@pytest.mark.anyio
async def test_the_idle_pass_captures_what_failed_to_capture(anyio_backend: str) -> None:
    from obsmem.knowledge import InMemoryKnowledgeStore, RecordDraft

    class Flaky(InMemoryKnowledgeStore):
        broken = True

        async def append_record(self, draft: RecordDraft, *, actor: str, reason: str) -> object:  # type: ignore[override]
            if self.broken:
                raise RuntimeError("knowledge store down")
            return await super().append_record(draft, actor=actor, reason=reason)

    store = MemoryStore()
    graph = Flaky()
    knowledge = Knowledge(graph)
    async with Memory(store, config=config(), knowledge=knowledge) as memory:
        async with memory.turn(thread_id="t1", resource_id="alice",
                               messages=[Message.user("I work as a Staff Engineer at Tessera Logistics.")]) as turn:
            await turn.step([Message.assistant("Noted.")])
        await memory.observe("t1")
        await memory.settled()
    graph.broken = False  # back up; the conversation is over, no event will come
    worker = Worker(store, config=config(), knowledge=knowledge, poll_interval_s=0.01)
    runs = await worker.curate_when_idle()
    assert any(run.agent == "capture" and run.written for run in runs)
    user = await graph.resolve_node("User", "org:default/resource:alice/thread:t1")
    assert user is not None
