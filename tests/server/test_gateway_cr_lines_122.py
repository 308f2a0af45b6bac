"""Upstream streams whose lines end with a lone CR (helper-122): the SSE specification ends a line
at CRLF, LF or CR, and the ``openai`` client (like obsmem's memory models, ``_http.capped_lines``)
reads all three.

On main the gateway split its upstream's stream at LF only: a stream ending its lines with CR was
relayed (whole events, ``\\r\\r``), so the client read the whole answer, but the gateway read no
event of it: a Chat Completions answer was never saved (its stream ended with the error event
'The upstream stream ended before the answer was complete.', after the ``[DONE]`` the ``openai``
client stops at), a Responses stream ended with that error (the client raised it) and saved
nothing, and over an Anthropic upstream the client got no text at all, only that error.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.server.test_gateway_streams import (
    Answer,
    Gateway,
    chunk,
    claude_end,
    claude_start,
    claude_text,
    open_gateway,
    sse,
    texts,
)


def cr(event: bytes) -> bytes:
    """``event`` with its lines ended by a lone CR."""
    return event.replace(b"\n", b"\r")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("cr-lines"))


@pytest.fixture(scope="module")
def anthropic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("cr-lines-anthropic"), upstream_kind="anthropic")


def test_a_chat_stream_with_cr_line_ends_is_saved(gateway: Gateway) -> None:
    """On main: the client read the text, and the thread held [('user', 'hi')] only."""
    gateway.upstream.respond = lambda path, body: Answer([cr(chunk({"role": "assistant", "content": "Carriage"})),
                                                          cr(chunk({"content": " returns."}, "stop")),
                                                          cr(sse("[DONE]"))])  # fmt: skip
    stream = gateway.client("cr-chat").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Carriage returns."
    assert texts(gateway.stored("cr-chat")) == [("user", "hi"), ("assistant", "Carriage returns.")]


def test_a_crlf_split_between_reads_is_one_line_end(gateway: Gateway) -> None:
    """A CRLF whose CR ends one upstream chunk and whose LF opens the next ends one line, not two
    (an empty line between would end the event early). Passed on main too: it guards the CR rule."""
    first = chunk({"role": "assistant", "content": "Split"}).replace(b"\n", b"\r\n")
    second = chunk({"content": " ends."}, "stop").replace(b"\n", b"\r\n")
    at = first.index(b"\r\n") + 1  # after the CR of the first line's CRLF
    gateway.upstream.respond = lambda path, body: Answer([first[:at], first[at:], second,
                                                          sse("[DONE]").replace(b"\n", b"\r\n")])  # fmt: skip
    stream = gateway.client("crlf-split").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Split ends."
    assert texts(gateway.stored("crlf-split")) == [("user", "hi"), ("assistant", "Split ends.")]


def test_a_responses_stream_with_cr_line_ends_is_saved(gateway: Gateway) -> None:
    """On main: openai.APIError (the stream 'ended before the answer was complete'), nothing saved."""
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "Returned.", "annotations": []}]}]}  # fmt: skip
    gateway.upstream.respond = lambda path, body: Answer(
        [cr(sse({"type": "response.completed", "response": response}, "response.completed"))])
    stream = gateway.client("cr-responses").responses.create(model="m", input="hi", stream=True)
    assert [event.type for event in stream] == ["response.completed"]
    assert texts(gateway.stored("cr-responses")) == [("user", "hi"), ("assistant", "Returned.")]


def test_an_anthropic_stream_with_cr_line_ends_is_translated_and_saved(anthropic: Gateway) -> None:
    """On main: openai.APIError '... ended before the answer was complete (no message_stop)' and no text."""
    events = [*claude_start(), *claude_text(0, "Over", " Anthropic."), *claude_end("end_turn")]
    anthropic.upstream.respond = lambda path, body: Answer([cr(event) for event in events])
    try:
        stream = anthropic.client("cr-anthropic").chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    except openai.APIError as exc:
        pytest.fail(f"the stream failed: {exc}")
    assert text == "Over Anthropic."
    assert texts(anthropic.stored("cr-anthropic")) == [("user", "hi"), ("assistant", "Over Anthropic.")]
