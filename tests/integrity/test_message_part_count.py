"""One message has at most ``MAX_MESSAGE_PARTS`` parts, refused at the door before any work.

Found by a hostile review: one message of 200,000 one-word text parts took 10 s of a turn and
held the event loop for 780 ms (every part is counted, rendered and stored), 400 MB of memory;
over REST an 11 MB body of 400,000 parts was accepted. On main these were all accepted; now the
message is refused (:class:`~obsmem.errors.InvalidInputError` naming the limit), a dict before
its parts are validated one by one, and nothing is saved.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import InvalidInputError, Memory, Message, TextPart
from obsmem.types import MAX_MESSAGE_PARTS

pytestmark = pytest.mark.anyio


def _many(n: int) -> Message:
    return Message(role="user", parts=tuple(TextPart(text=f"w{i}") for i in range(n)))


def _many_dict(n: int) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": f"w{i}"} for i in range(n)]}


@pytest.mark.parametrize("shape", ["Message", "dict"])
async def test_a_message_of_too_many_parts_is_refused_and_nothing_is_saved(shape: str) -> None:
    too_many = _many(MAX_MESSAGE_PARTS + 1) if shape == "Message" else _many_dict(MAX_MESSAGE_PARTS + 1)
    async with Memory("memory://") as memory:
        with pytest.raises(InvalidInputError, match=f"more than one message may have \\({MAX_MESSAGE_PARTS}\\)"):
            await memory.begin_turn(thread_id="t", resource_id="u", messages=[too_many])
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi")])
        with pytest.raises(InvalidInputError, match="parts"):
            await turn.step([too_many])
        await turn.end()
        with pytest.raises(InvalidInputError, match="parts"):
            await memory.save_messages("t", [too_many])
        assert [m.text for m in await memory.list_messages("t")] == ["hi"]


async def test_a_message_at_the_limit_is_kept() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t2", resource_id="u", messages=[_many(MAX_MESSAGE_PARTS)])
        await turn.end()
        [stored] = await memory.list_messages("t2")
        assert len(stored.parts) == MAX_MESSAGE_PARTS
