"""An id holding a lone surrogate (``"\\ud800"``, which a JSON body or a model's tool call can
carry) is refused as invalid input on every public call that takes one, on every store: on
SQLite it raised ``UnicodeEncodeError`` out of ``get_thread``, ``list_messages`` and the recall
tool (found by helper-144), a crash instead of a typed error. No store can hold such an id."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.errors import InvalidInputError

pytestmark = pytest.mark.anyio

BAD = "chat-\ud800"

CALLS: dict[str, Callable[[Memory], Awaitable[Any]]] = {
    "get_thread": lambda m: m.get_thread(BAD),
    "list_messages": lambda m: m.list_messages(BAD),
    "get_context": lambda m: m.get_context(BAD),
    "delete_thread": lambda m: m.delete_thread(BAD),
    "begin_turn": lambda m: m.begin_turn(thread_id=BAD, resource_id="u", messages=[Message.user("hi")]),
    "begin_turn resource": lambda m: m.begin_turn(thread_id="t", resource_id=BAD, messages=[Message.user("hi")]),
    "recall tool": lambda m: m.call_recall_tool(BAD, {"mode": "threads"}),
    "delete_resource": lambda m: m.delete_resource(BAD),
}


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("call", list(CALLS))
async def test_a_lone_surrogate_id_is_invalid_input(store: str, call: str, tmp_path: Path) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'o.db'}"
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello")])
        await turn.end([Message.assistant("hi")])
        with pytest.raises(InvalidInputError, match="surrogate"):
            await CALLS[call](memory)
        assert [m.text for m in await memory.list_messages("t")] == ["hello", "hi"]
