"""A tombstoned value does not come back spelled with look-alike letters (helper-123's hostile
review): after a reviewer rejected "their password hint is the blue teapot" with a tombstone, the
same words with a Cyrillic "а" or "о" or a Greek "ο" in them (which a prompt-injected model or a
hostile tool output can write, and which look the same in the review queue) were written again:
the tombstone compared letters as code points, so one look-alike letter made another word.
Different words in another script stay different values."""

from __future__ import annotations

import pytest

from obsmem.errors import TombstonedValueError
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"
TOMBSTONED = "their password hint is the blue teapot"


@pytest.mark.parametrize("lookalike", [
    "their pаssword hint is the blue teapot",         # Cyrillic а
    "their password hint is the blue teаpоt",         # Cyrillic а, о
    "thеir passwοrd hint is thе bluе teapot",         # Cyrillic е, Greek ο
    "THEIR PАSSWORD HINT IS THE BLUE TEAPOT",         # Cyrillic А
    "their password hint is the bІue teapot",         # Cyrillic І for l
])
async def test_a_tombstoned_value_in_look_alike_letters_is_refused(anyio_backend: str, lookalike: str) -> None:
    async with Knowledge.in_memory(actor="reviewer") as knowledge:
        node = await knowledge.node("User", "person", RES)
        record = await knowledge.append(node.id, TOMBSTONED, RES, reason="said")
        await knowledge.remove(record.id, RES, reason="wrong", tombstone=True)
        with pytest.raises(TombstonedValueError):
            await knowledge.append(node.id, lookalike, RES, reason="said again")


async def test_other_words_in_another_script_are_other_values(anyio_backend: str) -> None:
    async with Knowledge.in_memory(actor="reviewer") as knowledge:
        node = await knowledge.node("User", "person", RES)
        record = await knowledge.append(node.id, "Маша любит чай", RES, reason="said")
        await knowledge.remove(record.id, RES, reason="wrong", tombstone=True)
        with pytest.raises(TombstonedValueError):
            await knowledge.append(node.id, "Mаша любит чай", RES, reason="said")  # Latin M
        await knowledge.append(node.id, "Маша любит кофе", RES, reason="said")
        await knowledge.append(node.id, "their password hint is the blue teapot", RES, reason="said")
