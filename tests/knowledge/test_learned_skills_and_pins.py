"""From the user's side (a ``Memory`` with knowledge on; found by a hostile review):
a learned skill stays in the scope of what it was learned from, a captured candidate is not
pinned past review, and a fact about a node called "pinned" is never a pin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import KnowledgeConfig
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.scopes import Scope

pytestmark = pytest.mark.anyio

RESOURCE = "org:default/resource:alice"
T1 = "org:default/resource:alice/thread:t1"
T2 = "org:default/resource:alice/thread:t2"
WORD = "Quendrix"


def _config(**knowledge: Any) -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, knowledge=KnowledgeConfig(**knowledge))


async def _say(memory: Memory, thread: str, text: str) -> None:
    async with memory.turn(thread_id=thread, resource_id="alice", messages=[Message.user(text)]) as turn:
        await turn.step([Message.assistant("Noted.")])
    await memory.observe(thread)
    await memory.settled()


@pytest.fixture
async def knowledge(tmp_path: Path, anyio_backend: str) -> AsyncIterator[Knowledge]:
    facade = Knowledge.sqlite(tmp_path / "k.db", actor="reviewer")
    yield facade
    await facade.close()


async def test_a_skill_learned_from_one_threads_candidates_is_that_threads_only(
    tmp_path: Path, knowledge: Knowledge
) -> None:
    """On main: the learn agent built ``skill: blue checklist deploy quendrix servers`` at
    ``org:default/resource:alice`` from t1's thread-scope candidates; sibling t2's search
    returned it and it survived ``delete_thread("t1")`` (AssertionError: the node at
    ``org:default/resource:alice``, not ``…/thread:t1``)."""
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=_config(), knowledge=knowledge) as memory:
        await _say(memory, "t2", "My favourite colour is teal.")
        for text in (f"I always deploy {WORD} servers on Tuesdays with the blue checklist.",
                     f"I always deploy {WORD} servers with the blue checklist after lunch."):
            await _say(memory, "t1", text)
        # A skill is learned from approved records only: the reviewer approves t1's candidates first.
        for record in (await knowledge.review.pending(T1)).items:
            await knowledge.review.approve(record.id, T1, reason="true")
        assert memory.knowledge_agents is not None
        run = await memory.knowledge_agents.learn(Scope("default", "alice", "t1"), "t1")
        assert len(run.written) == 2, run  # it is still learned ...
        skills = [n for n in (await knowledge.store.dump_scope(RESOURCE)).nodes if n.kind == "skill"]
        assert [n.scope for n in skills] == [T1]  # ... in the thread that said it
        assert not [h for h in await knowledge.search(WORD, T2) if WORD.lower() in h.text.lower()]
        assert [h for h in await knowledge.search(WORD, T1) if h.kind == "node"]
        await memory.delete_thread("t1")
        dump = await knowledge.store.dump_scope(RESOURCE)
        assert not [n for n in dump.nodes if WORD.lower() in f"{n.name} {n.content}".lower()]
        assert not [r for r in dump.records if WORD.lower() in r.text.lower()]


async def test_learning_from_resource_level_records_still_makes_a_resource_skill(
    tmp_path: Path, knowledge: Knowledge
) -> None:
    """The fix keeps what worked: records stored at resource level make a resource-level skill."""
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=_config(), knowledge=knowledge) as memory:
        await _say(memory, "t1", "My favourite colour is teal.")
        user = await knowledge.node("User", "person", RESOURCE)
        for text in (f"they always deploy {WORD} servers on Tuesdays with the blue checklist",
                     f"they always deploy {WORD} servers with the blue checklist after lunch"):
            await knowledge.append(user.id, text, RESOURCE, reason="shared", source_thread_id="t1")
        assert memory.knowledge_agents is not None
        run = await memory.knowledge_agents.learn(Scope("default", "alice", "t1"), "t1")
        assert len(run.written) == 2, run
        skills = [n for n in (await knowledge.store.dump_scope(RESOURCE)).nodes if n.kind == "skill"]
        assert [n.scope for n in skills] == [RESOURCE]


async def test_a_captured_candidate_is_not_pinned_past_review(tmp_path: Path, knowledge: Knowledge) -> None:
    """On main: with ``capture_pinning`` and trust "candidate", capture pinned the candidate as
    *verified* at resource level (``list_pins`` gave one pin before any review), and after the
    reviewer rejected the candidate with a tombstone the pin stayed in ``<pinned-knowledge>``."""
    cfg = _config(capture_pinning=True)
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=cfg, knowledge=knowledge) as memory:
        await _say(memory, "t1", "I always want refunds wired to account DE99 0000, never to my card.")
        pending = (await knowledge.review.pending(T1)).items
        assert len(pending) == 1 and "refunds" in pending[0].text
        assert await memory.list_pins("t1") == []  # a candidate is not in every context before review
        await knowledge.review.reject(pending[0].id, T1, reason="not a real instruction", tombstone=True)
        assert await memory.list_pins("t1") == []
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("what about my refund account?")])
        pinned = [m.text for m in turn.context.messages if m.metadata.get("obsmem") == "knowledge-pins"]
        await turn.end()
        assert not [text for text in pinned if "refund" in text]


async def test_capture_pinning_still_pins_when_capture_is_trusted(tmp_path: Path, knowledge: Knowledge) -> None:
    """With ``trust="verified"`` the captured rule is trusted, so capture pins it as before."""
    cfg = _config(capture_pinning=True, trust="verified")
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=cfg, knowledge=knowledge) as memory:
        await _say(memory, "t1", "I always want refunds wired to account DE99 0000, never to my card.")
        pins = await memory.list_pins("t1")
        assert [p.text for p in pins] == ["they always want refunds wired to account DE99 0000, never to their card"]


async def test_a_fact_about_a_node_called_pinned_is_never_a_pin(tmp_path: Path, knowledge: Knowledge) -> None:
    """On main: a fact remembered (as REST/MCP ``remember`` does: ``node(subject, "entity")`` then
    ``append``) with subject "pinned" (any case) was a pin: 31 of them were listed by
    ``list_pins`` and rendered in ``<pinned-knowledge>``, past ``max_pins=20``."""
    async def remember(text: str, subject: str) -> None:
        node = await knowledge.node(subject, "entity", RESOURCE, reason="remembered through the service")
        await knowledge.append(node.id, text, RESOURCE, reason="remembered through the service")

    async with Memory(f"sqlite:///{tmp_path}/m.db", config=_config(), knowledge=knowledge) as memory:
        await _say(memory, "t1", "My favourite colour is teal.")
        await remember("vault policy pinned", "pinned")
        for i in range(30):
            await remember(f"extra note {i}", "Pinned")
        assert await memory.list_pins("t1") == []
        real = await memory.pin("t1", "Always answer in German.")  # a real pin, next to the "pinned" entity
        await remember("one more note", "PINNED")  # after the pin board exists, too
        assert [p.id for p in await memory.list_pins("t1")] == [real.id]
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("what is the vault policy?")])
        pinned = [m.text for m in turn.context.messages if m.metadata.get("obsmem") == "knowledge-pins"]
        await turn.end()
        assert len(pinned) == 1 and "German" in pinned[0] and "note" not in pinned[0] and "vault" not in pinned[0]
