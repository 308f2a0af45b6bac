"""``memory.forget(value)`` and the LangChain blocks of images, audio and PDFs kept beside their
parts (``metadata["langchain"]["blocks"]``): an image's base64 says nothing (README: "an image's
base64 is matched by nothing"), so a value its letters happen to spell leaves it as it was. The
block was matched by its strings, base64 data included, where it is not under a ``base64`` key: a
legacy ``source_type: "base64"`` block's ``data``, an ``image_url``'s or a file's data: URI, an
``input_audio``'s data. Forgetting a short name found in the image's letters (a 300 KB image holds
nearly every three-letter string) dropped the provider's block and counted a forgotten part: the
legacy image went back to the model with no data at all, the others in another block kind. A
text file's data: URI and an address holding the value still go (controls); a legacy base64 text
file saying the value goes too: its file part holds none of the data, so the value stayed in the
block and went back to the model."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from obsmem import Memory
from obsmem.integrations.langchain import from_langchain, to_langchain

pytestmark = pytest.mark.anyio

# base64 whose letters spell the name (three bytes of PNG header first, so it is aligned)
IMAGE = base64.b64encode(b"\x89PN" + base64.b64decode("ZaphodQu") + bytes(range(60))).decode()
assert "Zaphod" in IMAGE

BLOCKS: dict[str, dict[str, Any]] = {
    "legacy": {"type": "image", "source_type": "base64", "data": IMAGE, "mime_type": "image/png"},
    "image_url": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}},
    "input_audio": {"type": "input_audio", "input_audio": {"data": IMAGE, "format": "wav"}},
    "openai_file": {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{IMAGE}", "filename": "r.pdf"}},
}


async def _forgotten(block: dict[str, Any], value: str) -> tuple[Any, Any, dict[str, int]]:
    async with Memory("memory://") as memory:
        await memory.create_thread("t", "u")
        await memory.save_messages("t", from_langchain([
            HumanMessage(content=[{"type": "text", "text": "Look at this."}, block]), AIMessage("Nice."),
        ]))  # fmt: skip
        before = to_langchain(await memory.list_messages("t"))[0].content
        counts = await memory.forget(value, thread_id="t")
        after = to_langchain(await memory.list_messages("t"))[0].content
    return before, after, counts


@pytest.mark.parametrize("kind", sorted(BLOCKS))
async def test_a_name_spelled_by_base64_leaves_the_block(kind: str) -> None:
    before, after, counts = await _forgotten(BLOCKS[kind], "Zaphod")
    assert after == before
    assert counts["parts"] == 0 and counts["messages"] == 0


async def test_the_control_a_text_file_saying_the_value_goes() -> None:
    text = base64.b64encode(b"Zaphod lives in Leeds.").decode()
    block = {"type": "image_url", "image_url": {"url": f"data:text/plain;base64,{text}"}}
    _, after, counts = await _forgotten(block, "Zaphod")
    assert counts["parts"] == 1
    assert "Zaphod" not in str(after) and text not in str(after)


async def test_the_control_an_address_holding_the_value_goes() -> None:
    block = {"type": "image_url", "image_url": {"url": "https://example.com/Zaphod.png", "detail": "high"}}
    _, after, counts = await _forgotten(block, "Zaphod")
    assert counts["parts"] == 1
    assert "Zaphod" not in str(after)


async def test_the_control_a_legacy_text_file_saying_the_value_goes() -> None:
    text = base64.b64encode(b"Zaphod lives in Leeds.").decode()
    block = {"type": "file", "source_type": "base64", "data": text, "mime_type": "text/plain"}
    _, after, counts = await _forgotten(block, "Zaphod")
    assert counts["parts"] == 1
    assert text not in str(after)


async def test_the_control_a_tool_returning_a_legacy_text_file_saying_the_value() -> None:
    text = base64.b64encode(b"Zaphod lives in Leeds.").decode()
    block = {"type": "file", "source_type": "base64", "data": text, "mime_type": "text/plain"}
    async with Memory("memory://") as memory:
        await memory.create_thread("t", "u")
        await memory.save_messages("t", from_langchain([
            HumanMessage("Fetch the note."),
            AIMessage(content="", tool_calls=[{"id": "c1", "name": "fetch", "args": {}}]),
            ToolMessage(content=[{"type": "text", "text": "Here."}, block], tool_call_id="c1"),
            AIMessage("Done."),
        ]))  # fmt: skip
        await memory.forget("Zaphod", thread_id="t")
        after = to_langchain(await memory.list_messages("t"))
    assert text not in str([m.content for m in after])
    assert "Here." in str(after[2].content)  # as a tool's image whose address said it
