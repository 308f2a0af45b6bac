"""A deleted phone number comes back when something follows it in the same run of digits and
separators (helper-127's hostile review of 7a91167).

7a91167 made a text "giving its own numbers" another value whatever its wording, before the
near-duplicate check. The number reader is greedy over spaces, brackets and slashes, so
"+49 151 2345678 (24/7)" reads as the one number 4915123456782 47, not the deleted one, and the
text is let through. Before 7a91167 the same text was refused as a near-duplicate.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio


async def say(memory: Memory, clock: FakeClock, text: str) -> None:
    await said(memory, clock, text, after_s=3600, thread="t1")


async def pending(memory: Memory, knowledge: Knowledge) -> list[str]:
    scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
    return [r.text for r in (await knowledge.review.pending(scope)).items]


async def tombstone_what_is_pending(memory: Memory, knowledge: Knowledge) -> None:
    scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
    items = (await knowledge.review.pending(scope)).items
    assert items, "nothing was captured to reject"
    for record in items:
        await knowledge.review.reject(record.id, scope, reason="deleted by the user", tombstone=True)


@pytest.mark.parametrize("suffix", [" (24/7)", " / 9"])
async def test_a_deleted_number_with_a_note_after_it_stays_out(anyio_backend: str, suffix: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        await say(memory, clock, "My phone number is +49 151 2345678.")
        await tombstone_what_is_pending(memory, knowledge)
        await say(memory, clock, f"My phone number is +49 151 2345678{suffix}.")
        assert await pending(memory, knowledge) == []
