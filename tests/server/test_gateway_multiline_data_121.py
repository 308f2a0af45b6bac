"""A streamed answer whose events carry their JSON over several ``data:`` lines (helper-121's hostile
review): legal server-sent events (a server pretty-printing its chunks), which the ``openai``
client reads by joining the lines with a newline, as the SSE specification says.

On main the gateway read each ``data:`` line as a whole payload: none parsed, the answer the client
read in full was never seen, and memory saved no answer at all (the thread held only the user's
message). The gateway's reader now joins an event's data lines as the client does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.test_gateway_streams import Answer, Gateway, open_gateway, sse, texts


def pretty(data: Any) -> bytes:
    """One event whose JSON spans several ``data:`` lines."""
    return "".join(f"data: {line}\n" for line in json.dumps(data, indent=2).split("\n")).encode() + b"\n"


def delta(content: dict[str, Any], finish: str | None = None) -> bytes:
    return pretty({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": content, "finish_reason": finish}]})  # fmt: skip


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("multiline"))


def test_events_over_several_data_lines_are_saved_as_the_client_read_them(gateway: Gateway) -> None:
    """On main: the client read 'Pretty answer.', the thread held [('user', 'hi')] only."""
    gateway.upstream.respond = lambda path, body: Answer([
        delta({"role": "assistant", "content": "Pretty"}), delta({"content": " answer."}), delta({}, "stop"),
        sse("[DONE]"),
    ])  # fmt: skip
    stream = gateway.client("multiline").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Pretty answer."
    assert texts(gateway.stored("multiline")) == [("user", "hi"), ("assistant", "Pretty answer.")]


def test_a_responses_stream_over_several_data_lines_is_saved(gateway: Gateway) -> None:
    """On main: nothing of the answer was saved."""
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "Spread out.", "annotations": []}]}]}  # fmt: skip
    gateway.upstream.respond = lambda path, body: Answer([
        b"event: response.completed\n" + pretty({"type": "response.completed", "response": response}),
    ])  # fmt: skip
    stream = gateway.client("multiline-responses").responses.create(model="m", input="hi", stream=True)
    assert [event.type for event in stream] == ["response.completed"]
    assert texts(gateway.stored("multiline-responses")) == [("user", "hi"), ("assistant", "Spread out.")]
