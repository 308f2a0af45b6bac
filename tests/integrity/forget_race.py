"""What the tests of a forget racing a save share: a conversation saying a secret (in a message of
its own, which the forget deletes, and beside other text, which it rewrites), a check for the
secret, and a hook that runs a forget between a save's read of the thread and its write."""

from __future__ import annotations

import json
from collections.abc import Callable

from obsmem import Memory, Message

SECRET = "4242-9191"


def holding(messages: list[Message]) -> list[str]:
    """The ids of ``messages`` that hold :data:`SECRET` anywhere."""
    return [m.id for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


async def said(memory: Memory) -> list[Message]:
    """Two turns of thread ``t1`` (resource ``u1``) saying :data:`SECRET`; the two user messages."""
    alone = Message.user(SECRET)  # deleted by the forget (nothing else in it)
    beside = Message(role="user", parts=[{"type": "text", "text": "Hi there."}, {"type": "text", "text": f"Code {SECRET}"}])
    for message in (alone, beside):
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[message])
        await turn.end([Message.assistant("Noted.")])
    return [alone, beside]


def forget_first(memory: Memory, forgetter: Memory | None = None) -> Callable[[], None]:
    """Make ``memory``'s next save run ``forgetter``'s (default: its own) forget of :data:`SECRET` in
    ``t1`` between its read of the thread and its write (the input markers check, on every save
    path); returns the undo."""
    checked = memory.engine.core.input_markers_checked
    fired = False

    async def forget_meanwhile(thread_id: str, messages: list[Message]) -> list[Message]:
        nonlocal fired
        if not fired:
            fired = True
            await (forgetter or memory).forget(SECRET, thread_id="t1")
        return await checked(thread_id, messages)

    memory.engine.core.input_markers_checked = forget_meanwhile  # type: ignore[method-assign]
    return lambda: setattr(memory.engine.core, "input_markers_checked", checked)
