"""A user whose value changes back (Berlin → Paris → Berlin again) is remembered at the latest
value: the return to an earlier value is a new fact, not a restatement of the superseded one.

Driven through ``Memory`` over simulated months (a :class:`FakeClock`, messages stamped by it),
with the offline agents: capture on every observation, curation after each month.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio

MONTH = 30 * 86400.0


async def say(memory: Memory, clock: FakeClock, text: str) -> None:
    await said(memory, clock, text, after_s=MONTH)


async def current(knowledge: Knowledge, scope: str) -> list[str]:
    user = await knowledge.store.resolve_node("User", scope)
    assert user is not None
    return [r.text for r in (await knowledge.store.list_about(user.id, scope, view=RecordView(), limit=100)).items]


@pytest.mark.parametrize("curate_between", [True, False])
async def test_a_value_that_changes_back_is_remembered_at_its_latest(anyio_backend: str, curate_between: bool) -> None:
    async with alice_memory(trust="verified") as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key
        for text in ["My home city is Berlin.", "My home city is Paris now.", "My home city is Berlin again."]:
            await say(memory, clock, text)
            if curate_between:
                await memory.curate_knowledge("t1")
        await memory.curate_knowledge("t1")
        live = await current(knowledge, scope)
        assert any("Berlin again" in text for text in live), live
        assert not any("Paris" in text for text in live), live


async def test_re_reading_an_old_observation_still_resurrects_nothing(anyio_backend: str) -> None:
    """The guard the fix keeps: catching up on old observations does not bring back a value a
    later statement superseded."""
    async with alice_memory(trust="verified") as (memory, knowledge, clock):
        context = memory.knowledge_agents.scope(None, "alice", "t1")
        await say(memory, clock, "My home city is Berlin.")
        first = await memory.get_observations("t1")
        await say(memory, clock, "My home city is Paris now.")
        await memory.curate_knowledge("t1")
        # An old delta read again (a catch-up from an earlier cursor, say) holds the old value.
        run = await memory.knowledge_agents.capture(first, context, source_thread_id="t1")
        assert run.written == []
        await memory.curate_knowledge("t1")
        live = await current(knowledge, context.key)
        assert len(live) == 1 and "Paris" in live[0], live
