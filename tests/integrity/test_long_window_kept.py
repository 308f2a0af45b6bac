"""A window of many short messages is kept between boundaries, not read whole at each one.

A chat of short lines ("ok", "thanks", a bot's one-word answers) can hold thousands of messages
below ``message_tokens`` (30,000 by default: some 6,000 messages of a few tokens). On main every
boundary of such a thread read and decoded the whole window again (windows above 512 messages
were not kept): 2,000 rows decoded per boundary here, 60-200 ms a step at 3,200 messages, work
that grew with the window at every step. Counted, not timed: the rows the store decodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.storage import SQLiteStore

pytestmark = pytest.mark.anyio

SHORT = 2_000


async def test_a_long_window_of_short_messages_is_not_decoded_again_at_every_boundary(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}")
    await memory.create_thread("t1", "u1")
    await memory.save_messages("t1", [Message.user("ok") if i % 2 == 0 else Message.assistant("k") for i in range(SHORT)])
    store = memory.store
    assert isinstance(store, SQLiteStore)
    decoded = 0
    real = store._message

    def counting(row: object) -> Message:
        nonlocal decoded
        decoded += 1
        return real(row)  # type: ignore[arg-type]

    store._message = counting  # type: ignore[method-assign]
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("first question")])
    await turn.end([Message.assistant("first answer")])
    assert decoded >= SHORT  # the first boundary reads the window once
    await memory.settled()  # the buffer its end started (12,000 tokens) has written the head:
    turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("second question")])
    await turn.end([Message.assistant("second answer")])  # read once more, after that write
    for i in range(1, 5):
        decoded = 0
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"question {i}")])
        context = await turn.step([Message.assistant(f"answer {i}")])
        await turn.end()
        assert [m.text for m in context.raw_messages][-2:] == [f"question {i}", f"answer {i}"]
        assert len(context.raw_messages) == SHORT + 2 * (i + 2)  # nothing observed: all of it is shown
        assert decoded <= 8, decoded  # the messages saved, not the window
    await memory.aclose()
