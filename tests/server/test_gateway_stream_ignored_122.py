"""An upstream that ignores ``stream: true`` and answers with one JSON body (helper-122's hostile
review): some OpenAI-compatible servers and proxies do (obsmem's own memory models read such a
body as the whole answer: ``models/transport.py``, "A server that ignores ``stream: true``").

On main the gateway relayed the JSON as if it were a stream: the gateway read no event in it, the
client (``openai``, ``stream=True``) got 'The upstream stream ended before the answer was
complete.' and no text, and the thread held only the user's message. Now the whole answer is
saved and reaches the client as the stream it asked for: a Chat Completions chunk carrying the
whole message, then ``[DONE]``; on the Responses API its ``response.completed`` event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.server.test_gateway_streams import Answer, Gateway, open_gateway, texts


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("stream-ignored"))


@pytest.fixture(scope="module")
def anthropic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("stream-ignored-anthropic"), upstream_kind="anthropic")


def _json(body: object) -> Answer:
    return Answer([json.dumps(body).encode()], media="application/json")


def test_a_chat_answer_sent_whole_to_a_stream_request_is_streamed_and_saved(gateway: Gateway) -> None:
    """On main: openai.APIError 'The upstream stream ended before the answer was complete.', no
    text, thread [('user', 'hi')]."""
    gateway.upstream.respond = lambda path, body: _json({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Whole."}}],
    })  # fmt: skip
    stream = gateway.client("ignored-chat").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    chunks = [c for c in stream if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Whole."
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert texts(gateway.stored("ignored-chat")) == [("user", "hi"), ("assistant", "Whole.")]


def test_a_tool_call_sent_whole_to_a_stream_request_reaches_the_client(gateway: Gateway) -> None:
    """On main: openai.APIError, nothing saved."""
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    gateway.upstream.respond = lambda path, body: _json({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
    })  # fmt: skip
    stream = gateway.client("ignored-tool").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "look it up"}])  # fmt: skip
    calls = [t for c in stream if c.choices for t in (c.choices[0].delta.tool_calls or [])]
    assert [(t.index, t.id, t.function.name, t.function.arguments) for t in calls if t.function] == [
        (0, "call_1", "lookup", '{"q": "x"}')]  # fmt: skip
    saved = gateway.stored("ignored-tool")
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert [p["type"] for p in saved[1]["parts"]] == ["tool-call"]


def test_a_responses_answer_sent_whole_to_a_stream_request_is_streamed_and_saved(gateway: Gateway) -> None:
    """On main: openai.APIError, nothing saved."""
    gateway.upstream.respond = lambda path, body: _json({
        "id": "resp_1", "object": "response", "status": "completed", "model": "m",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Whole response.", "annotations": []}]}],
    })  # fmt: skip
    stream = gateway.client("ignored-responses").responses.create(model="m", input="hi", stream=True)
    events = list(stream)
    assert [e.type for e in events] == ["response.completed"]
    assert events[0].response.output_text == "Whole response."  # type: ignore[union-attr]
    assert texts(gateway.stored("ignored-responses")) == [("user", "hi"), ("assistant", "Whole response.")]


def test_an_anthropic_answer_sent_whole_to_a_stream_request_is_streamed_and_saved(anthropic: Gateway) -> None:
    """On main: openai.APIError '... ended before the answer was complete (no message_stop)', no text."""
    anthropic.upstream.respond = lambda path, body: _json({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
        "content": [{"type": "text", "text": "Whole Claude."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    })  # fmt: skip
    stream = anthropic.client("ignored-anthropic").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    chunks = [c for c in stream if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Whole Claude."
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert texts(anthropic.stored("ignored-anthropic")) == [("user", "hi"), ("assistant", "Whole Claude.")]
