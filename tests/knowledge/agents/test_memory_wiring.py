"""Memory ↔ knowledge: capture runs on committed observations, remind and pins reach the context,
and a failing agent never blocks a turn nor loses an observation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import KnowledgeConfig
from obsmem.errors import ConfigError
from obsmem.knowledge import InMemoryKnowledgeStore, Knowledge, RecordDraft, RecordView, TrustState

pytestmark = pytest.mark.anyio

ALL = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)


def config(**knowledge: Any) -> MemoryConfig:
    return MemoryConfig(
        observation={"message_tokens": 120, "buffer_tokens": False},
        reflection={"observation_tokens": 100_000},
        knowledge=KnowledgeConfig(**knowledge),
    )


FACTS = [
    "Quick intro: I work as a Senior Backend Engineer at Tessera Logistics in Munich.",
    "My phone number is +49 151 5550 7720, put it in the signature please.",
    "We have a beagle called Kiwi and a daughter, Ida, who is six.",
    "Also, I always want an aisle seat when you book flights.",
]


async def converse(memory: Memory, thread: str, texts: list[str], resource: str = "alice") -> None:
    for text in texts:
        async with memory.turn(thread_id=thread, resource_id=resource, messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant("Noted, thanks for telling me.")])
    await memory.settled()


class FlakyStore(InMemoryKnowledgeStore):
    broken = True

    async def append_record(self, draft: RecordDraft, *, actor: str, reason: str) -> Any:
        if self.broken:
            raise RuntimeError("knowledge store down")
        return await super().append_record(draft, actor=actor, reason=reason)


async def test_capture_runs_on_committed_observations(anyio_backend: str) -> None:
    knowledge = Knowledge.in_memory()
    async with Memory("memory://", config=config(), knowledge=knowledge) as memory:
        await converse(memory, "t1", FACTS)
        assert memory.knowledge_agents is not None
        scope = memory.knowledge_agents.scope(None, "alice", "t1")
        user = await knowledge.store.resolve_node("User", scope.key)
        assert user is not None
        records = (await knowledge.store.list_about(user.id, scope.key, view=ALL, limit=100)).items
        texts = " | ".join(r.text for r in records)
        assert "Senior Backend Engineer" in texts and "+49 151 5550 7720" in texts and "Kiwi" in texts
        assert {r.source_thread_id for r in records} == {"t1"}
        assert all(r.trust is TrustState.CANDIDATE for r in records)
        # A second catch-up finds nothing new: the capture lane's cursor moved past what it took.
        again = await memory.capture_knowledge("t1")
        assert all(run.written == [] for run in again)


async def test_a_failing_agent_never_blocks_a_turn_nor_loses_observations(anyio_backend: str) -> None:
    store = FlakyStore()
    knowledge = Knowledge(store)
    async with Memory("memory://", config=config(), knowledge=knowledge) as memory:
        await converse(memory, "t1", FACTS)
        record = await memory.get_record("t1")
        assert record is not None and "Tessera Logistics" in record.active_observations
        assert await store.list_vectors() == []
        user = await store.resolve_node("User", "org:default/resource:alice")
        assert user is None or (await store.list_about(user.id, "org:default/resource:alice/thread:t1",
                                                       view=ALL)).items == []
        store.broken = False  # the store is back: nothing was lost, capture catches up
        runs = await memory.capture_knowledge("t1")
        written = [r for run in runs for r in run.written]
        assert any("Tessera Logistics" in r.text for r in written)


async def test_reminder_and_pins_reach_the_context(anyio_backend: str) -> None:
    knowledge = Knowledge.in_memory()
    async with Memory("memory://", config=config(trust="verified", pins_tokens=60), knowledge=knowledge) as memory:
        await converse(memory, "t1", FACTS)
        pin = await memory.pin("t1", "Nadia is allergic to peanuts: never suggest dishes with peanuts.")
        for n in range(5):
            await memory.pin("t1", f"Filler pin number {n} with a few more words to use up the pin budget.")
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("What is my phone number again?")])
        own = {m.metadata.get("obsmem"): m.text for m in turn.context.messages if m.role == "system"}
        await turn.end()
        assert "+49 151 5550 7720" in own["knowledge-reminder"]
        assert "Sources: " in own["knowledge-reminder"]
        pinned = own["knowledge-pins"]
        assert pin.id in pinned and "did not fit the 60-token pin budget" in pinned
        # A turn with nothing relevant gets no reminder at all.
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("Thanks, that is all.")])
        assert not any(m.metadata.get("obsmem") == "knowledge-reminder" for m in turn.context.messages)
        await turn.end()


async def test_memory_without_knowledge_is_unchanged_and_knowledge_is_checked(anyio_backend: str) -> None:
    async with Memory("memory://", config=config()) as memory:
        await converse(memory, "t1", FACTS[:1])
        assert memory.knowledge_agents is None
        with pytest.raises(ConfigError):
            await memory.pin("t1", "x")
    with pytest.raises(ConfigError):
        Memory("memory://", knowledge="sqlite:///k.db")  # type: ignore[arg-type]


async def test_buffered_chunks_are_captured_when_they_are_activated(anyio_backend: str) -> None:
    knowledge = Knowledge.in_memory()
    buffered = MemoryConfig(observation={"message_tokens": 200, "buffer_tokens": 0.25},
                            reflection={"observation_tokens": 100_000})
    async with Memory("memory://", config=buffered, knowledge=knowledge) as memory:
        await converse(memory, "t1", FACTS * 3)
        record = await memory.get_record("t1")
        assert record is not None and record.active_observations  # activated from buffered chunks
        assert memory.knowledge_agents is not None
        assert any(run.agent == "capture" and run.written for run in memory.knowledge_agents.runs)
        user = await knowledge.store.resolve_node("User", "org:default/resource:alice/thread:t1")
        assert user is not None
        texts = [r.text for r in (await knowledge.store.list_about(
            user.id, "org:default/resource:alice/thread:t1", view=ALL, limit=100)).items]
        assert any("Tessera Logistics" in t for t in texts)


class HangingSearchStore(InMemoryKnowledgeStore):
    async def search_lexical(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()  # never answers


async def test_a_hanging_remind_never_holds_the_turn(anyio_backend: str) -> None:
    knowledge = Knowledge(HangingSearchStore())
    async with Memory("memory://", config=config(remind_timeout_s=0.05), knowledge=knowledge) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="alice",
                                       messages=[Message.user("What is my phone number again?")])
        assert not any(m.metadata.get("obsmem") == "knowledge-reminder" for m in turn.context.messages)
        assert turn.context.raw_messages[-1].text == "What is my phone number again?"
        await turn.end()


def test_the_sync_facade_pins(tmp_path: Any) -> None:
    from obsmem import SyncMemory

    with SyncMemory("memory://", knowledge=Knowledge.in_memory()) as memory:
        memory.create_thread("t1", "alice")
        pin = memory.pin("t1", "Always answer in German.")
        assert [p.id for p in memory.list_pins("t1")] == [pin.id]
        memory.unpin("t1", pin.id)
        assert memory.list_pins("t1") == []
        assert memory.curate_knowledge("t1").status == "no-op"
