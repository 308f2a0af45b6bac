"""Memory.forget scans a thread's messages off the event loop (found by helper-140).

Measured with a heartbeat beside ``memory.forget(value, thread_id=...)`` on SQLite: a
20,000-message thread held the loop 2.7 s, one 5 MB message 0.64 s. ``Memory._forget_in_thread``
read every message and checked each for the value (``forget_in_message``: a dump of the message
and a canonical spelling of every text) on the loop's thread, and a message that does not hold
the value needs no store call, so nothing yielded between them. Counted here: the messages
checked on the loop's thread.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import obsmem.memory as memory_module
from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio


async def test_forget_scans_a_long_thread_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    on_loop = 0
    original = memory_module.forget_in_message

    def watched(message: Message, value: str) -> Any:
        nonlocal on_loop
        if threading.get_ident() == loop_thread:
            on_loop += 1
        return original(message, value)

    monkeypatch.setattr(memory_module, "forget_in_message", watched)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False))
    async with Memory("memory://", config=config) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Hi.")])
        await turn.end()
        for start in range(0, 2_000, 500):
            await memory.save_messages("t", [Message.user(f"note {i} about Berlin") for i in range(start, start + 500)])
        counts = await memory.forget("4111 1111 1111 1111", thread_id="t")
    assert counts["messages"] == 0
    assert on_loop < 100, f"{on_loop} messages scanned for the value on the event loop's thread"


async def test_what_holds_the_value_still_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The positive control: checked off the loop, the messages holding the value are still
    rewritten or deleted, and the others are left as they are."""
    card = "4111 1111 1111 1111"
    config = MemoryConfig(observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False))
    async with Memory("memory://", config=config) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Hi.")])
        await turn.end()
        said = [Message.user(f"note {i} about Berlin") for i in range(1_200)]
        said[10] = Message.user(card)  # only the value: the message goes
        said[700] = Message(role="user", parts=(TextPart(text=f"my card is {card}"), TextPart(text="keep this")))
        await memory.save_messages("t", said)
        counts = await memory.forget(card, thread_id="t")
        stored = await memory.store.list_messages("t")
    assert counts["messages"] == 1 and counts["parts"] == 1, counts
    assert not any(card in m.text for m in stored)
    assert any(m.text == "keep this" for m in stored) and len(stored) == 1 + 1_200 - 1
