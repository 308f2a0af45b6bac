"""``memory.forget(value)`` removes what holds the value: a message's words, a file's name, a tool's
arguments. It matched the value against each text part's JSON form, field names and type tag
included (``{"type": "text", "text": ...}``), so forgetting "x", "e", "text" or "type" deleted
every message in scope, none of which said it (``obsmem forget x --yes``, MCP ``forget`` and the
library alike). A file's base64 data matched any short value too. Found by helper 196."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import FilePart, TextPart

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _chat() -> list[Message]:
    return [
        Message.user("hello secret"),
        Message(role="user", parts=(TextPart(text="my photo"), FilePart(media_type="image/png", data=PNG, filename="holiday.png"))),
        Message(role="user", parts=(TextPart(text="as a URI"), FilePart(media_type="image/png", url=f"data:image/png;base64,{PNG}"))),
        Message(role="user", parts=(TextPart(text="a note"), FilePart(media_type="text/plain", url="data:text/plain,pin is 4417"))),
        Message.assistant("ok"),
    ]


async def _forgetting(tmp_path: Path, value: str) -> tuple[dict[str, int], list[Message]]:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "r1")
        await memory.save_messages("t1", _chat())
        counts = await memory.forget(value, thread_id="t1")
        return counts, await memory.list_messages("t1")


@pytest.mark.parametrize("value", ["x", "z", "text", "type", "ex", "file", "image/png", "media_type", "data", "base64", "Q", "AAAA"])
async def test_a_value_no_message_says_changes_nothing(tmp_path: Path, value: str) -> None:
    counts, kept = await _forgetting(tmp_path, value)
    assert counts["messages"] == 0 and counts["parts"] == 0
    assert [(m.role, m.parts) for m in kept] == [(m.role, m.parts) for m in _chat()]


@pytest.mark.parametrize(("value", "gone"), [
    ("secret", "hello secret"),  # a text part: its message had nothing else, so it goes
    ("holiday", "holiday.png"),  # a file's name: the file goes, the words beside it stay
    ("4417", "pin is 4417"),  # a file whose inline data is text (a data: URI not in base64)
])
async def test_what_is_said_is_still_forgotten(tmp_path: Path, value: str, gone: str) -> None:
    counts, kept = await _forgetting(tmp_path, value)
    assert counts["messages"] + counts["parts"] == 1
    assert not any(gone in m.model_dump_json() for m in kept)
    assert len(kept) == (4 if value == "secret" else 5)
