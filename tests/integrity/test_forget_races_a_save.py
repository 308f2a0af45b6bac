"""A forget that lands while a save is on its way: the save read the thread (and its forgotten
ids) before the forget noted them, and writes after the forget rewrote and deleted. The app's
old copies (its history saved back, a framework's state) must not bring the value back. The
interleaving is made certain with a hook on the step every save path takes between its read of
the thread and its write (the input markers check); what is checked is what the app reads."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio
SECRET = "4242-9191"


def _holding(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


async def _said(memory: Memory) -> list[Message]:
    alone = Message.user(SECRET)  # deleted by the forget (nothing else in it)
    beside = Message(role="user", parts=[{"type": "text", "text": "Hi there."}, {"type": "text", "text": f"Code {SECRET}"}])
    for said in (alone, beside):
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        await turn.end([Message.assistant("Noted.")])
    return [alone, beside]


def _forget_first(memory: Memory) -> Callable[[], None]:
    """Make the next save run a forget between its read of the thread and its write; returns the undo."""
    checked = memory.engine.core.input_markers_checked
    fired = False

    async def forget_meanwhile(thread_id: str, messages: list[Message]) -> list[Message]:
        nonlocal fired
        if not fired:
            fired = True
            await memory.forget(SECRET, thread_id="t1")
        return await checked(thread_id, messages)

    memory.engine.core.input_markers_checked = forget_meanwhile  # type: ignore[method-assign]
    return lambda: setattr(memory.engine.core, "input_markers_checked", checked)


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'm.db'}"


async def test_save_messages_racing_a_forget(url: str) -> None:
    async with Memory(url) as memory:
        history = await _said(memory)
        undo = _forget_first(memory)
        await memory.save_messages("t1", history)
        undo()
        assert _holding(await memory.list_messages("t1")) == []


@pytest.mark.parametrize("at", ["step", "end"])
async def test_a_turn_saving_back_its_history_racing_a_forget(url: str, at: str) -> None:
    async with Memory(url) as memory:
        history = await _said(memory)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("next")])
        undo = _forget_first(memory)
        save: Callable[[list[Message]], Awaitable[object]] = turn.step if at == "step" else turn.end
        await save([*history, Message.assistant("ok")])
        undo()
        await turn.end()
        stored = await memory.list_messages("t1")
        assert _holding(stored) == []
        assert [m.text for m in stored][-2:] == ["next", "ok"]  # the turn's own messages are stored
