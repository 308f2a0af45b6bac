"""Two time axes after curation: a value the user changed is closed, not erased from history.

The user said "My home city is Berlin" in January and "My home city is Paris now" a month
later; curation ran on its own (the age trigger). Before: a read ``as_of`` a January day returned
nothing at all, because curate had soft-deleted the Berlin record, and deleted records answer no
``as_of`` read. A value the user *corrected* ("…, not Kiwi") was never true and stays out.
Driven through ``Memory`` with the offline agents over simulated days, on both local adapters.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView

from .alice import said

pytestmark = pytest.mark.anyio

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


async def say(memory: Memory, clock: FakeClock, text: str, days: float) -> None:
    await said(memory, clock, text, after_s=days * 86400)


async def about(knowledge: Knowledge, scope: str, view: RecordView) -> list[str]:
    user = await knowledge.store.resolve_node("User", scope)
    assert user is not None
    return sorted(r.text for r in (await knowledge.store.list_about(user.id, scope, view=view, limit=100)).items)


def open_knowledge(kind: str, tmp_path: Path, clock: FakeClock) -> Knowledge:
    if kind == "sqlite":
        return Knowledge.sqlite(tmp_path / "k.db", clock=clock)
    return Knowledge.in_memory(clock=clock)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_changed_value_answers_as_of_its_own_time_after_curation(
    anyio_backend: str, tmp_path: Path, kind: str
) -> None:
    clock = FakeClock(start=START)
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          knowledge={"trust": "verified"})
    async with open_knowledge(kind, tmp_path, clock) as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge, clock=clock) as memory:
            assert memory.knowledge_agents is not None
            scope = memory.knowledge_agents.scope(None, "alice", "t1").key
            await say(memory, clock, "My home city is Berlin.", days=0)
            await say(memory, clock, "My home city is Paris now.", days=40)
            await say(memory, clock, "We have a beagle called Kiwi.", days=1)
            await say(memory, clock, "A small correction: our beagle is called Kiki, not Kiwi.", days=1)
            await memory.curate_knowledge("t1")

            now = await about(knowledge, scope, RecordView())
            assert any("Paris" in t for t in now) and not any("Berlin" in t for t in now), now
            january = await about(knowledge, scope, RecordView(as_of=START + timedelta(days=5)))
            assert january == ["their home city is Berlin"], january
            # After the move only Paris; the corrected dog name was never true, so it answers no date.
            for day in (41, 42.5, 50):
                later = await about(knowledge, scope, RecordView(as_of=START + timedelta(days=day)))
                assert not any("Berlin" in t or "Kiwi" in t and "not Kiwi" not in t for t in later), (day, later)
            assert any("Paris" in t for t in await about(knowledge, scope, RecordView(as_of=START + timedelta(days=41))))
            # What the store knew in January (before the move was said) is unchanged too.
            known = await about(knowledge, scope, RecordView(as_known_at=START + timedelta(days=5)))
            assert known == ["their home city is Berlin"], known
