"""The gateway against an upstream whose answer holds JSON nested too deeply to decode (helper-121's
hostile review), seen from the client's side: the ``openai`` client (or raw httpx) against a live
gateway whose upstream is a real local HTTP server.

On main, ``json.loads`` of such an answer raised ``RecursionError``, which only ``ValueError`` was
caught for:

- a whole Chat Completions answer got a bare 500 "Internal Server Error" instead of the upstream's
  answer, and the turn was never ended;
- a stream holding one such event broke off mid-relay (the connection dropped, no ``[DONE]``, no
  error event) though the README says the relay never breaks on an event's shape;
- an Anthropic upstream's stream broke off the same way; its whole answer got a 500, not the
  502 an untranslatable answer gets.

Such an answer is now read as any other unreadable JSON is: relayed unchanged (OpenAI) or refused
with a 502 (Anthropic, whose answer the gateway must translate), the rest of a stream relayed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.test_gateway_streams import (
    Answer, Gateway, chunk, claude_end, claude_start, claude_text, claude_tool, open_gateway, sse, texts,
)  # fmt: skip

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("deep"))


@pytest.fixture(scope="module")
def anthropic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("deep-anthropic"), upstream_kind="anthropic")


def test_a_whole_answer_nested_too_deep_is_relayed_not_a_500(gateway: Gateway) -> None:
    """On main: 500 Internal Server Error (RecursionError in the gateway)."""
    gateway.upstream.respond = lambda path, body: Answer([DEEP.encode()], media="application/json")
    with gateway.raw("deep-whole") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "hello"}]})  # fmt: skip
    assert response.status_code == 200, response.text[:300]
    assert response.content == DEEP.encode()
    assert texts(gateway.stored("deep-whole")) == [("user", "hello")]


def test_a_stream_holding_an_event_nested_too_deep_is_relayed_to_its_end(gateway: Gateway) -> None:
    """On main: the relay broke at the deep event; the client's connection dropped
    (httpx.RemoteProtocolError: peer closed connection without sending complete message body).
    Read raw: the event is relayed unchanged, as every odd event is (the ``openai`` client's own
    parser would raise on it)."""
    gateway.upstream.respond = lambda path, body: Answer([
        chunk({"role": "assistant", "content": "Fine"}), sse(DEEP), chunk({"content": " answer."}),
        chunk({}, "stop"), sse("[DONE]"),
    ])  # fmt: skip
    with gateway.raw("deep-stream") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 200
    assert sse(DEEP).decode() in response.text
    assert response.text.endswith("data: [DONE]\n\n") and '"error"' not in response.text
    assert texts(gateway.stored("deep-stream")) == [("user", "hi"), ("assistant", "Fine answer.")]


def test_an_anthropic_whole_answer_nested_too_deep_is_a_502(anthropic: Gateway) -> None:
    """On main: 500 Internal Server Error."""
    anthropic.upstream.respond = lambda path, body: Answer([DEEP.encode()], media="application/json")
    with anthropic.raw("deep-a-whole") as client:
        response = client.post("/v1/chat/completions", json={"model": "claude", "messages": [
            {"role": "user", "content": "hello"}]})  # fmt: skip
    assert response.status_code == 502, response.text[:300]
    assert response.json()["error"]["type"] == "UpstreamError"
    assert texts(anthropic.stored("deep-a-whole")) == [("user", "hello")]


def test_an_anthropic_stream_holding_an_event_nested_too_deep_is_relayed_to_its_end(anthropic: Gateway) -> None:
    """On main: the connection dropped at the deep event (no finish_reason, no error event)."""
    anthropic.upstream.respond = lambda path, body: Answer([
        *claude_start(), *claude_text(0, "Still here."), sse(DEEP, "ping"), *claude_end("end_turn"),
    ])  # fmt: skip
    stream = anthropic.client("deep-a-stream").chat.completions.create(
        model="claude", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    received = [c for c in stream if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in received) == "Still here."
    assert received[-1].choices[0].finish_reason == "stop"
    assert texts(anthropic.stored("deep-a-stream")) == [("user", "hi"), ("assistant", "Still here.")]


def test_an_anthropic_stream_with_tool_arguments_nested_too_deep_ends_and_saves_no_call(anthropic: Gateway) -> None:
    """On main: the connection dropped at message_stop (RecursionError while saving the answer);
    the turn was never ended."""
    anthropic.upstream.respond = lambda path, body: Answer([
        *claude_start(), *claude_text(0, "Calling."), *claude_tool(1, "lookup", '{"q": ' + DEEP + "}"),
        *claude_end("tool_use"),
    ])  # fmt: skip
    stream = anthropic.client("deep-a-tool").chat.completions.create(
        model="claude", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    received = [c for c in stream if c.choices]
    assert received[-1].choices[0].finish_reason == "tool_calls"
    stored = anthropic.stored("deep-a-tool")
    assert texts(stored) == [("user", "hi"), ("assistant", "Calling.")]
    assert not any(p["type"] == "tool-call" for m in stored for p in m["parts"])


@pytest.mark.parametrize("tokens", ["[1]", "1e400", '"many"'], ids=["a-list", "infinite", "a-word"])
def test_an_anthropic_answer_with_odd_usage_is_translated_not_a_500(anthropic: Gateway, tokens: str) -> None:
    """On main: 500 Internal Server Error (TypeError / OverflowError from int() of the token count)."""
    body = ('{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "stop_reason": "end_turn", '
            '"content": [{"type": "text", "text": "Answered."}], "usage": {"input_tokens": ' + tokens
            + ', "output_tokens": 2}}')  # fmt: skip
    anthropic.upstream.respond = lambda path, body_: Answer([body.encode()], media="application/json")
    thread = f"odd-usage-{len(tokens)}"
    answer = anthropic.client(thread).chat.completions.create(
        model="claude", messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert answer.choices[0].message.content == "Answered."
    assert answer.usage is not None and answer.usage.completion_tokens == 2
    assert texts(anthropic.stored(thread)) == [("user", "hi"), ("assistant", "Answered.")]


def test_a_responses_answer_nested_too_deep_is_relayed_not_a_500(gateway: Gateway) -> None:
    """On main: 500 Internal Server Error."""
    gateway.upstream.respond = lambda path, body: Answer([DEEP.encode()], media="application/json")
    with gateway.raw("deep-responses") as client:
        response = client.post("/v1/responses", json={"model": "m", "input": "hello"})
    assert response.status_code == 200, response.text[:300]
    assert texts(gateway.stored("deep-responses")) == [("user", "hello")]
