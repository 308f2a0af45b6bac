"""``memory.forget`` and an app that saves back the conversation as it held it (README: "saving
back what you sent is safe"; LangChain's middleware made anew, after a restart or per request,
with the app's whole history; an import). A copy of a message forget rewrote was taken as an
edit and overwrote it, and a copy of a message forget deleted (left with nothing) was stored
again at the end: both brought the forgotten value back into the thread and every later context
(found by helper 175). Such copies are now never stored: the stored message stands, a deleted
one stays deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio
SECRET = "4242-9191"


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'memory.db'}"


def _holds(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


async def _forgotten(memory: Memory) -> tuple[Message, Message]:
    """A thread where the value was said alone (that message deleted by forget) and beside other
    text (that part removed); returns the two messages as the app still holds them."""
    alone = Message.user(f"{SECRET}")
    beside = Message(role="user", parts=[{"type": "text", "text": "Hi there."}, {"type": "text", "text": f"Code {SECRET}"}])
    for said in (alone, beside):
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        await turn.end([Message.assistant("Noted.")])
    counts = await memory.forget(SECRET, thread_id="t1")
    assert counts["messages"] == 1 and counts["parts"] == 1, counts
    assert _holds(await memory.list_messages("t1")) == []
    return alone, beside


async def test_a_history_saved_back_after_forget_does_not_bring_the_value_back(url: str) -> None:
    async with Memory(url) as memory:
        alone, beside = await _forgotten(memory)
        turn = await memory.begin_turn(thread_id="t1", messages=[alone, beside, Message.user("next")])
        assert _holds(turn.context.messages) == [], "the model is not sent the value again"
        await turn.end([Message.assistant("fine")])
        stored = await memory.list_messages("t1")
        assert _holds(stored) == []
        assert alone.id not in {m.id for m in stored}, "a message forget deleted stays deleted"
        assert [m.text for m in stored if m.id == beside.id] == ["Hi there."], "the rewritten message stands"
        assert stored[-2].text == "next", "the new input is stored, in its place"


async def test_one_message_saved_back_alone_or_by_save_messages_is_not_stored_either(url: str) -> None:
    async with Memory(url) as memory:
        alone, beside = await _forgotten(memory)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("go on")])
        await turn.step([beside])  # one message, given again on its own
        await turn.end()
        await memory.save_messages("t1", [alone, beside])  # an import of the old history
        assert _holds(await memory.list_messages("t1")) == []
        context = await memory.get_context("t1")
        assert _holds(context.messages) == []


async def test_forgotten_ids_survive_a_new_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    async with Memory(url) as memory:
        alone, beside = await _forgotten(memory)
    async with Memory(url) as memory:  # a restart: a new middleware given the app's whole history
        turn = await memory.begin_turn(thread_id="t1", messages=[alone, beside, Message.user("back again")])
        await turn.end([Message.assistant("welcome back")])
        assert _holds(await memory.list_messages("t1")) == []
