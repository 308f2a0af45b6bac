"""A deleted phone number comes back when something follows it in the same run of digits and
separators (helper-127's hostile review of 7a91167).

7a91167 made a text "giving its own numbers" another value whatever its wording, before the
near-duplicate check. The number reader is greedy over spaces, brackets and slashes, so
"+49 151 2345678 (24/7)" reads as the one number 4915123456782 47, not the deleted one, and the
text is let through. Before 7a91167 the same text was refused as a near-duplicate.
"""

from __future__ import annotations

import pytest


from .alice import alice_memory, pending, say, tombstone_what_is_pending

pytestmark = pytest.mark.anyio




@pytest.mark.parametrize("suffix", [" (24/7)", " / 9"])
async def test_a_deleted_number_with_a_note_after_it_stays_out(anyio_backend: str, suffix: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        await say(memory, clock, "My phone number is +49 151 2345678.")
        await tombstone_what_is_pending(memory, knowledge)
        await say(memory, clock, f"My phone number is +49 151 2345678{suffix}.")
        assert await pending(memory, knowledge) == []
