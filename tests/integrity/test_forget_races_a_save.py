"""A forget that lands while a save is on its way: the save read the thread (and its forgotten
ids) before the forget noted them, and writes after the forget rewrote and deleted. The app's
old copies (its history saved back, a framework's state) must not bring the value back. The
interleaving is made certain with a hook on the step every save path takes between its read of
the thread and its write (the input markers check); what is checked is what the app reads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from obsmem import Memory, Message

from .forget_race import forget_first, holding, said

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'm.db'}"


async def test_save_messages_racing_a_forget(url: str) -> None:
    async with Memory(url) as memory:
        history = await said(memory)
        undo = forget_first(memory)
        await memory.save_messages("t1", history)
        undo()
        assert holding(await memory.list_messages("t1")) == []


@pytest.mark.parametrize("at", ["step", "end"])
async def test_a_turn_saving_back_its_history_racing_a_forget(url: str, at: str) -> None:
    async with Memory(url) as memory:
        history = await said(memory)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("next")])
        undo = forget_first(memory)
        save: Callable[[list[Message]], Awaitable[object]] = turn.step if at == "step" else turn.end
        await save([*history, Message.assistant("ok")])
        undo()
        await turn.end()
        stored = await memory.list_messages("t1")
        assert holding(stored) == []
        assert [m.text for m in stored][-2:] == ["next", "ok"]  # the turn's own messages are stored
