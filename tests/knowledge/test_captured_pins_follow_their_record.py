"""A pin that capture made repeats its record's text: it is never broader than that record,
and it goes when the record goes (found by a review of the pin gaps left open).

On main a rule said in thread t1 (a thread-level record) was pinned at *resource* level: the
sibling thread t2 listed it in ``list_pins`` and had it in its ``<pinned-knowledge>``, and
after ``delete_thread("t1")`` the pin, holding the rule's full text, stayed in the knowledge
store. Removing, editing or erasing the record left the pin stored too (only left out of the
block), so an erase left the erased text in the pin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import KnowledgeConfig
from obsmem.knowledge import Knowledge
from obsmem.knowledge.repeats import ANY_RECORD
from tests.knowledge.test_learned_skills_and_pins import _say
from tests.knowledge.test_learned_skills_and_pins import knowledge as knowledge  # the fixture: a SQLite Knowledge

pytestmark = pytest.mark.anyio

RESOURCE = "org:default/resource:alice"
T1 = "org:default/resource:alice/thread:t1"
RULE = "I always want refunds wired to account DE99 0000, never to my card."


def _config() -> MemoryConfig:
    return MemoryConfig(
        observation={"message_tokens": 60, "buffer_tokens": False},
        knowledge=KnowledgeConfig(capture_pinning=True, trust="verified"),
    )


async def _pinned_block(memory: Memory, thread: str) -> str:
    turn = await memory.begin_turn(thread_id=thread, resource_id="alice", messages=[Message.user("refunds?")])
    await turn.end()
    return "".join(m.text for m in turn.context.messages if m.metadata.get("obsmem") == "knowledge-pins")


async def test_a_threads_rule_is_pinned_for_that_thread_only_and_goes_with_it(
    tmp_path: Path, knowledge: Knowledge
) -> None:
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=_config(), knowledge=knowledge) as memory:
        await _say(memory, "t1", RULE)
        await _say(memory, "t2", "Hello there.")
        assert [p.scope for p in await memory.list_pins("t1")] == [T1]
        assert "DE99" in await _pinned_block(memory, "t1")
        assert await memory.list_pins("t2") == []  # on main: t1's rule, pinned at resource level
        assert "DE99" not in await _pinned_block(memory, "t2")
        await memory.delete_thread("t1")
        left = [r.text for r in (await knowledge.store.dump_scope(RESOURCE)).records if "DE99" in r.text]
        assert left == []  # on main: the resource-level pin, with the rule's text


async def _source_and_pin(memory: Memory, knowledge: Knowledge) -> tuple[str, str]:
    await _say(memory, "t1", RULE)
    (pin,) = await memory.list_pins("t1")
    source = str(pin.metadata["pin_source"])
    assert (await knowledge.store.get_record(source, T1)) is not None
    return source, pin.id


@pytest.mark.parametrize("action", ["remove", "edit", "erase"])
async def test_the_pin_goes_with_its_record(tmp_path: Path, knowledge: Knowledge, action: str) -> None:
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=_config(), knowledge=knowledge) as memory:
        source, pin = await _source_and_pin(memory, knowledge)
        if action == "remove":
            await knowledge.remove(source, T1, reason="no longer true")
        elif action == "edit":
            await knowledge.review.edit(source, T1, "They want refunds to their card.", reason="corrected")
        else:
            await knowledge.erase([source], T1, reason="erase it")
        assert await knowledge.store.get_record(pin, T1) is None  # on main: still a live, verified record
        if action == "erase":
            assert await knowledge.store.get_record(pin, T1, ANY_RECORD) is None  # erased, not only removed
            texts = [r.text for r in (await knowledge.store.dump_scope(T1)).records]
            assert not [t for t in texts if "DE99" in t]
        assert await memory.list_pins("t1") == []
        assert "DE99" not in await _pinned_block(memory, "t1")
