"""memory.forget while a turn is open (the model call in flight), and the app's old history
given to that turn's step/end (LangChain's state, a framework sending its whole conversation):
the turn read the thread's forgotten ids at begin_turn, before the forget noted them, so the old
copies were saved over the rewritten message and again in place of the deleted one: the value was
back in the thread (found by helper 177). A boundary now takes them from the thread's row it reads
anyway (the check that the thread is still the turn's)."""

from __future__ import annotations

import json

import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio
SECRET = "4242-9191"


def _holding(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


async def _said(memory: Memory) -> tuple[Message, Message]:
    alone = Message.user(SECRET)
    beside = Message(role="user", parts=[{"type": "text", "text": "Hi there."}, {"type": "text", "text": f"Code {SECRET}"}])
    for said in (alone, beside):
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        await turn.end([Message.assistant("Noted.")])
    return alone, beside


@pytest.mark.parametrize("at", ["end", "step"])
async def test_a_forget_while_a_turn_is_open(at: str) -> None:
    async with Memory("memory://") as memory:
        alone, beside = await _said(memory)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("next")])
        await memory.forget(SECRET, thread_id="t1")  # another request, while the model answers
        if at == "step":
            await turn.step([alone, beside])
            await turn.end()
        else:
            await turn.end([alone, beside, Message.assistant("ok")])
        assert _holding(await memory.list_messages("t1")) == []

