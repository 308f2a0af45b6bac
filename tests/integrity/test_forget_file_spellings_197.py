"""``memory.forget(value)`` removes a file that holds the value in what it says: its address, its
name, its inline data where that is text. A URL and a data: URI write a space or a non-ASCII letter
percent-encoded ("Zaphod%20Quux"), and a text file attached inline (a notes.txt, a JSON export) is
stored base64: the value was in the thread's files after the forget, in each of those spellings.
Base64 that is not text (an image) still matches nothing."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import FilePart, ReasoningPart, TextPart

pytestmark = pytest.mark.anyio

NAME = "Zaphod Quux"
B64 = base64.b64encode(f"notes of {NAME}: likes tea".encode()).decode()


def _with(file: FilePart) -> Message:
    return Message(role="user", parts=(TextPart(text="see attached"), file))


FILES = {
    "url percent-encoded": FilePart(media_type="image/png", url="https://files.example/Zaphod%20Quux.png"),
    "data: URI percent-encoded": FilePart(media_type="text/plain", url="data:text/plain,I%20am%20Zaphod%20Quux"),
    "text file as base64 data": FilePart(media_type="text/plain", data=B64, filename="notes.txt"),
    "text file as a base64 data: URI": FilePart(media_type="text/plain", url=f"data:text/plain;base64,{B64}"),
    "JSON file as base64 data": FilePart(
        media_type="application/json", data=base64.b64encode(f'{{"name": "{NAME}"}}'.encode()).decode()
    ),
    "an accented name percent-encoded": FilePart(media_type="image/png", url="https://files.example/Zo%C3%AB.png"),
}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("how", list(FILES))
async def test_a_file_holding_the_value_in_its_own_spelling_goes(tmp_path: Path, kind: str, how: str) -> None:
    value = "Zoë" if "accented" in how else NAME
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", [_with(FILES[how]), Message.assistant("Got it.")])
        counts = await memory.forget(value, thread_id="t1")
        assert counts["parts"] == 1, counts
        stored = await memory.list_messages("t1")
        assert [[p.type for p in m.parts] for m in stored] == [["text"], ["text"]]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("value", ["tea", "Zaphod%20Quux", "Quux.png", "ZXMg"])
async def test_controls(tmp_path: Path, kind: str, value: str) -> None:
    # what a file says in any spelling goes; an image's base64, a reasoning's words as before
    png = FilePart(media_type="image/png", data="iVBORw0KGgoAAAANSUhEUgAAAAEAAAABZXMg", filename="a.png")
    reasoning = Message(role="assistant", parts=(ReasoningPart(text="the user likes tea"), TextPart(text="Noted.")))
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", [_with(FILES["text file as base64 data"]), _with(FILES["url percent-encoded"]),
                                          _with(png), reasoning])  # fmt: skip
        counts = await memory.forget(value, thread_id="t1")
        expected = {"tea": 2, "Zaphod%20Quux": 1, "Quux.png": 1, "ZXMg": 0}[value]
        assert counts["parts"] == expected, counts
