"""The gateway against an upstream that keeps its stream open after ``data: [DONE]`` (helper-121's
hostile review): a proxy holding the connection, a server that never ends its chunked body.

``[DONE]`` is the last event of a Chat Completions stream (and the Responses stream's own end when
a server sends one). On main the gateway went on reading after it, holding the last events (the
finish and ``[DONE]`` itself, kept back until the answer is saved) until the upstream closed or
``upstream_timeout_s`` (default 120 s) passed: every answer reached its client that much late, and
an Anthropic upstream's ``message_stop`` was already handled so. The test waits on the client's
read, with a bounded read timeout only as a guard: on main that read timed out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.live import auth
from tests.server.test_gateway_streams import Answer, Gateway, chunk, open_gateway, sse, texts

#: The guard on the client's read (far below upstream_timeout_s, which main waited for).
CLIENT_READ_S = 15.0


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("done-held"), upstream_timeout_s=300,
                            upstream_total_timeout_s=600)  # fmt: skip


def _lines_until_done(gateway: Gateway, thread: str, path: str, body: dict[str, Any]) -> list[str]:
    timeout = httpx.Timeout(CLIENT_READ_S)
    with httpx.Client(base_url=gateway.live.url, timeout=timeout,
                      headers={**auth(gateway.keys.alice), "X-Obsmem-Thread": thread}) as client:  # fmt: skip
        with client.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            lines: list[str] = []
            for line in response.iter_lines():
                lines.append(line)
                if line == "data: [DONE]":
                    return lines
    return lines


def test_a_chat_stream_held_open_after_done_reaches_the_client_at_once(gateway: Gateway) -> None:
    """On main: httpx.ReadTimeout after 15 s (the finish and [DONE] held until the upstream closed)."""
    release = threading.Event()

    def pieces() -> Iterator[bytes]:
        yield chunk({"role": "assistant", "content": "Quick"})
        yield chunk({"content": " answer."}, "stop")
        yield sse("[DONE]")
        release.wait(60)  # the upstream keeps its connection open

    gateway.upstream.respond = lambda path, body: Answer(pieces())
    try:
        lines = _lines_until_done(gateway, "held-chat", "/v1/chat/completions", {
            "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    finally:
        release.set()
    assert lines[-1] == "data: [DONE]" and not any('"error"' in line for line in lines)
    assert texts(gateway.stored("held-chat")) == [("user", "hi"), ("assistant", "Quick answer.")]


def test_a_responses_stream_held_open_after_done_reaches_the_client_at_once(gateway: Gateway) -> None:
    """On main: httpx.ReadTimeout after 15 s."""
    release = threading.Event()
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]}  # fmt: skip

    def pieces() -> Iterator[bytes]:
        yield sse({"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
                  "response.created")  # fmt: skip
        yield sse({"type": "response.completed", "response": response}, "response.completed")
        yield sse("[DONE]")
        release.wait(60)

    gateway.upstream.respond = lambda path, body: Answer(pieces())
    try:
        lines = _lines_until_done(gateway, "held-responses", "/v1/responses",
                                  {"model": "m", "stream": True, "input": "hi"})  # fmt: skip
    finally:
        release.set()
    assert lines[-1] == "data: [DONE]"
    assert texts(gateway.stored("held-responses")) == [("user", "hi"), ("assistant", "Done.")]
