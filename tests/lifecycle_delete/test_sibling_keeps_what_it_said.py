"""Deleting one thread of a user leaves what the user's other threads said in their memory.

In resource scope with sharing on, the offline observer of thread B is shown thread A's
sections, and it left out of B's memory every line A's section already had ("seen"), and thought
B's reply not new when A's lines named its terms. So the same fact said in both threads was kept
once, in A's section, and deleting A took it out of B's memory too: B's user had said it, and B
forgot it. What is new for a thread is now judged against its own sections."""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig

pytestmark = pytest.mark.anyio

SAID = [
    "My sister Dana moved to Lisbon last spring.",
    "I am allergic to penicillin.",
    "Our wedding anniversary is on June 14.",
]


async def say(memory: Memory, thread_id: str, text: str, reply: str) -> None:
    turn = await memory.begin_turn(thread_id=thread_id, resource_id="u", messages=[Message.user(text)])
    await turn.step([Message.assistant(reply)])
    await turn.end()


@pytest.mark.parametrize("share", [True, False])
async def test_a_fact_said_in_two_threads_stays_in_the_one_not_deleted(share: bool) -> None:
    config = MemoryConfig(
        scope="resource", share_threads_in_resource=share, observation=ObservationConfig(message_tokens=60)
    )
    async with Memory("memory://", config=config, max_turn_wait=None) as memory:
        for text in SAID:
            await say(memory, "first", text, "Thanks, I will remember that.")
        await memory.settled()
        for text in SAID:
            await say(memory, "second", text, "Thanks, I will remember that.")
        for i in range(4):  # enough for the last one to be observed too
            await say(memory, "second", f"What is on the calendar for week {i}?", f"Nothing for week {i}.")
        await memory.settled()
        assert await memory.delete_thread("first")
        record = await memory.get_record("second")
        assert record is not None
        kept = record.active_observations
    for needle in ("Lisbon", "penicillin", "June 14"):
        assert needle in kept, (needle, kept)


async def test_a_choice_in_one_thread_is_not_read_as_answering_a_siblings_question() -> None:
    """Thread A asked which hotel; thread B, later, says "Let's go with the Marriott." B's memory
    must not say "for the hotel": that is A's question, gone with A (the offline observer read
    the choice's topic from the last observed group, a sibling's with sharing on)."""
    config = MemoryConfig(
        scope="resource", share_threads_in_resource=True, observation=ObservationConfig(message_tokens=40)
    )
    async with Memory("memory://", config=config, max_turn_wait=None) as memory:
        await say(memory, "first", "Which hotel would you suggest for Porto?", "The Marriott or the Hilton.")
        await say(memory, "first", "Thanks, I will think about it overnight.", "Sure.")
        await memory.settled()
        record = await memory.get_record("first")
        assert record is not None and "which hotel" in record.active_observations.lower()
        await say(memory, "second", "Let's go with the Marriott.", "Done.")
        await say(memory, "second", "And book a table for two at eight.", "Booked.")
        await memory.settled()
        assert await memory.delete_thread("first")
        record = await memory.get_record("second")
        assert record is not None and "Marriott" in record.active_observations
        assert "hotel" not in record.active_observations.lower(), record.active_observations
