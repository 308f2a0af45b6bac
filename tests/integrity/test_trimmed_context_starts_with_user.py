"""A context cut short because memory is behind still begins with a user turn.

When a boundary stops waiting for its memory work (``max_turn_wait``) the oldest raw messages are
left out of the context (they stay pending). Anthropic's Messages API on Bedrock and on Vertex AI
refuses a conversation that starts with an assistant turn ("A conversation must start with a user
message"), so a cut that lands just before an assistant reply broke every such turn's model call.
The cut now falls where an exchange begins (before a user message) whenever one fits below the
newest question, which is never cut. Seen from the user's side: the context of a real turn,
converted with :func:`obsmem.convert.to_anthropic`.
"""

from __future__ import annotations

import asyncio

import pytest

from obsmem import Memory, MemoryConfig
from obsmem.convert import to_anthropic
from obsmem.models.testing import FunctionModel
from obsmem.types import Message

pytestmark = pytest.mark.anyio


async def _held(messages: list[Message], settings: object) -> str:
    await asyncio.Event().wait()  # a provider that never answers: the turn goes on without it
    return ""


def _exchange(i: int) -> list[Message]:
    # Replies of varied length, so the smallest cut that fits lands before replies and questions alike.
    return [
        Message.user(f"Question {i}: how is the shipment to warehouse {i} going?"),
        Message.assistant(f"Shipment {i} " + "is on schedule and insured; " * (1 + i % 7)),
    ]


@pytest.mark.parametrize("exchanges", range(30, 42))
async def test_a_trimmed_context_starts_with_a_user_turn(exchanges: int) -> None:
    config = MemoryConfig().replace(observation={"message_tokens": 300, "buffer_tokens": False})
    async with Memory(
        "memory://", config=config, observer=FunctionModel(_held), reflector="offline", max_turn_wait=0.05,
    ) as memory:
        await memory.create_thread("t1", resource_id="u1")
        await memory.save_messages("t1", [m for i in range(exchanges) for m in _exchange(i)])
        question = Message.user("And the newest shipment?")
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[question])
        assert turn.trimmed > 0, "memory is behind: the window was cut"
        system, wire = to_anthropic(turn.context.messages)
        assert wire[0]["role"] == "user", f"the conversation starts with {wire[0]['content']!r}"
        assert wire[-1]["content"][-1]["text"] == "And the newest shipment?"
        context = await memory.get_context("t1")
        if context.trimmed:
            assert to_anthropic(context.messages)[1][0]["role"] == "user"
        await memory.aclose(cancel=True)
