"""Streamed memory-model answers whose text holds U+2028, U+2029 or U+0085 (helper-121's hostile
review), against a real local server speaking the wire protocol.

JSON lets these characters stand unescaped inside a string, and servers written with Python's
``json.dumps(ensure_ascii=False)`` or Rust's serde (vLLM, pydantic) send them so. A server-sent
event's lines end only at CR, LF or CRLF (the SSE specification), but obsmem split the stream as
``str.splitlines`` does, at every Unicode line boundary: a delta quoting a user's text with a
LINE SEPARATOR (pasted from a PDF, a web page) was cut in two, its ``data:`` line no longer JSON,
and every observation of that text failed, retried and failed again (``ModelUnavailableError``:
"a stream event that is not valid JSON"), leaving those messages pending for good. Now only CR and
LF end a line; the characters are data, and reach the answer's text unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from obsmem.models.anthropic import AnthropicModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.transport import Endpoint
from obsmem.types import Message

from .wire_server import Reply, WireServer

pytestmark = pytest.mark.anyio

TEXT = "User said: first line\u2028second line\u2029next paragraph\x85after NEL\x0bvt\x1cfs."


def _event(data: object, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return head + "data: " + json.dumps(data, ensure_ascii=False) + "\n\n"  # raw, as such servers send


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as wire:
        yield wire


async def test_an_openai_stream_keeps_unicode_line_separators_as_text(server: WireServer) -> None:
    """On main: ModelUnavailableError (openai-compatible returned a stream event that is not valid JSON)."""
    server.script(Reply(events=[
        _event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": TEXT}}]}),
        _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}), "data: [DONE]\n\n",
    ]))  # fmt: skip
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), timeout_s=5)
    response = await model.request([Message.user("observe this")])
    assert response.text == TEXT
    assert response.finish_reason == "stop"


async def test_an_anthropic_stream_keeps_unicode_line_separators_as_text(server: WireServer) -> None:
    """On main: ModelUnavailableError (a stream event that is not valid JSON)."""
    server.script(Reply(events=[
        _event({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                     "model": "claude", "content": [],
                                                     "usage": {"input_tokens": 3, "output_tokens": 0}}},
               "message_start"),
        _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
               "content_block_start"),
        _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}},
               "content_block_delta"),
        _event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
               "message_delta"),
        _event({"type": "message_stop"}, "message_stop"),
    ]))  # fmt: skip
    model = AnthropicModel("claude", Endpoint("anthropic", server.url), timeout_s=5)
    response = await model.request([Message.user("observe this")])
    assert response.text == TEXT
    assert response.finish_reason == "stop"
