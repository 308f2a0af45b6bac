"""Driving a recorded conversation through the Turn API, the way an agent loop would.

A turn starts at a user message (consecutive user messages start it together) and every
following assistant message is one step. Nothing here touches the engine directly: the
harness measures exactly what an application would get.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from obsmem.clock import FakeClock
from obsmem.memory import Memory
from obsmem.types import Message

__all__ = ["group_turns", "replay"]


def group_turns(messages: Sequence[Message]) -> list[tuple[list[Message], list[Message]]]:
    """Split messages into (turn input, responses) pairs; a leading assistant message opens a turn."""
    turns: list[tuple[list[Message], list[Message]]] = []
    for message in messages:
        if message.role == "user":
            opening = turns[-1][0] if turns and not turns[-1][1] else None
            if opening is not None and all(m.role == "user" for m in opening):
                opening.append(message)
            else:
                turns.append(([message], []))
        elif not turns:
            turns.append(([message], []))
        else:
            turns[-1][1].append(message)
    return turns


async def replay(
    memory: Memory,
    messages: Sequence[Message],
    *,
    thread_id: str,
    resource_id: str,
    on_message: Callable[[int], None] | None = None,
    clock: FakeClock | None = None,
) -> None:
    """Replay ``messages`` into ``thread_id``; ``on_message(n)`` reports n more messages saved.

    With ``clock``, time follows the recording: before each message is saved the clock moves
    to its timestamp, so "now" in the context (relative dates, gap markers) is the
    conversation's now, not the machine's.
    """

    def follow(message: Message) -> None:
        if clock is not None and message.created_at > clock.now():
            clock.advance((message.created_at - clock.now()).total_seconds())

    for inputs, responses in group_turns(messages):
        follow(inputs[-1])
        turn = await memory.begin_turn(thread_id=thread_id, resource_id=resource_id, messages=inputs)
        if on_message is not None:
            on_message(len(inputs))
        for response in responses:
            follow(response)
            await turn.step([response])
            if on_message is not None:
                on_message(1)
        await turn.end()
