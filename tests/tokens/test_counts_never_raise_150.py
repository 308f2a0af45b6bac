"""Token counts never raise for what a user sends: every message below passes validation, and
counting it (for the window, before anything is stored or observed) raised, so ``begin_turn``
failed with a ``StorageError`` and the turn was lost.

* an image whose inline base64 holds a character that is not ASCII (a UI's "…" after a truncated
  paste, a smart quote): ``binascii`` raises ``ValueError``, not ``binascii.Error``;
* a PDF by a URL that ``urllib`` cannot split (a malformed IPv6 host), whose file name is counted;
* a tool result holding an integer of more than 4,300 digits (a calculator's 2**20000): Python
  refuses to write it in decimal, and the counter's fallback, ``repr``, refuses as well.
"""

from __future__ import annotations

import pytest

from obsmem import Memory, Message
from obsmem.tokens import TokenCounter
from obsmem.types import FilePart, TextPart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

PNG_1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _with_file(part: FilePart) -> list[Message]:
    return [Message(role="user", parts=[TextPart(text="Look at this."), part])]


def _with_result(result: object) -> list[Message]:
    return [
        Message.user("What is 2**20000?"),
        Message(
            role="assistant", parts=[ToolCallPart(tool_call_id="c1", tool_name="calc", args={"expr": "2**20000"})]
        ),
        Message(role="tool", parts=[ToolResultPart(tool_call_id="c1", tool_name="calc", result=result)]),
    ]


CASES = {
    "image data URL with an ellipsis": _with_file(
        FilePart(media_type="image/png", data="data:image/png;base64," + PNG_1x1[:40] + "…" + PNG_1x1[-3:])
    ),
    "raw base64 with a smart quote": _with_file(FilePart(media_type="image/png", data="“" + PNG_1x1 + "”")),
    "PDF data URL with an accent": _with_file(
        FilePart(media_type="application/pdf", data="data:application/pdf;base64,JVBERi0xLjQKé123")
    ),
    "PDF by a malformed IPv6 URL": _with_file(
        FilePart(media_type="application/pdf", url="https://[fe80::1/report.pdf")
    ),
    "a 6,021-digit result": _with_result(2**20000),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_a_turn_with_it_is_counted_not_lost(name: str) -> None:
    messages = CASES[name]
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=messages)
        await turn.step([Message.assistant("Done.")])
        await turn.end()
        stored = await memory.store.list_messages("t")
    assert len(stored) == len(messages) + 1
    for exact in (True, False):
        first = TokenCounter(exact=exact).count_messages(messages)
        assert first == TokenCounter(exact=exact, cache_size=0).count_messages(messages) > 0


def test_a_long_integer_is_counted_as_its_digits() -> None:
    """6,021 digits are about 2,007 o200k tokens (three digits a token), not a placeholder's few."""
    counter = TokenCounter(exact=True, cache_size=0)
    alone = counter.count_messages(_with_result("x"))
    counted = counter.count_messages(_with_result(2**20000)) - alone
    assert 1_990 <= counted <= 2_030, counted


def test_a_long_integer_inside_a_result_is_counted() -> None:
    """The same number inside a result's JSON (and as a tool call's argument)."""
    messages = _with_result({"value": [2**20000, -(2**20000)], "ok": True, 7: {2**20000}})
    call = ToolCallPart(tool_call_id="c2", tool_name="calc", args={"x": 2**20000})
    messages.append(Message(role="assistant", parts=[call]))
    for exact in (True, False):
        first = TokenCounter(exact=exact).count_messages(messages)
        assert first == TokenCounter(exact=exact, cache_size=0).count_messages(messages) > 4_000
