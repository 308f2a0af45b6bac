"""A Responses stream whose upstream holds its connection open after ``response.completed``
(helper-122): OpenAI's Responses API sends no ``data: [DONE]``; its terminal event
(``response.completed``, ``response.incomplete``, ``response.failed`` or ``error``) is the last.
A proxy holding the connection, or a server that never ends its chunked body, is the case.

e9210b9 stopped reading at ``[DONE]``; on main a Responses stream without it was still read past
its terminal event, the last event (kept back until the answer is saved) held until the upstream
closed or ``upstream_timeout_s`` passed. The test reads until the gateway ends the stream, with a
bounded read timeout only as a guard: on main that read timed out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.live import auth
from tests.server.test_gateway_streams import Answer, Gateway, open_gateway, sse, texts

#: The guard on the client's read (far below upstream_timeout_s, which main waited for).
CLIENT_READ_S = 15.0

RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]}  # fmt: skip


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("completed-held"), upstream_timeout_s=300,
                            upstream_total_timeout_s=600)  # fmt: skip


def _all_lines(gateway: Gateway, thread: str, body: dict[str, Any]) -> list[str]:
    with httpx.Client(base_url=gateway.live.url, timeout=httpx.Timeout(CLIENT_READ_S),
                      headers={**auth(gateway.keys.alice), "X-Obsmem-Thread": thread}) as client:  # fmt: skip
        with client.stream("POST", "/v1/responses", json=body) as response:
            assert response.status_code == 200
            return list(response.iter_lines())


@pytest.mark.parametrize("terminal", ["response.completed", "response.incomplete"])
def test_a_responses_stream_held_open_after_its_terminal_event_ends_at_once(gateway: Gateway, terminal: str) -> None:
    """On main: httpx.ReadTimeout after 15 s (the terminal event held until the upstream closed)."""
    release = threading.Event()
    response = {**RESPONSE, "status": terminal.removeprefix("response.")}

    def pieces() -> Iterator[bytes]:
        yield sse({"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
                  "response.created")  # fmt: skip
        yield sse({"type": terminal, "response": response}, terminal)
        release.wait(60)  # the upstream keeps its connection open, with no [DONE]

    gateway.upstream.respond = lambda path, body: Answer(pieces())
    thread = f"held-{terminal}"
    try:
        lines = _all_lines(gateway, thread, {"model": "m", "stream": True, "input": "hi"})
    finally:
        release.set()
    assert f"event: {terminal}" in lines and not any('"error"' in line for line in lines)
    assert texts(gateway.stored(thread)) == [("user", "hi"), ("assistant", "Done.")]


def test_a_responses_stream_held_open_after_a_failure_ends_at_once(gateway: Gateway) -> None:
    """On main: httpx.ReadTimeout after 15 s. A failed response is relayed, and saves no answer."""
    release = threading.Event()
    failed = {**RESPONSE, "status": "failed", "output": [], "error": {"code": "server_error", "message": "boom"}}

    def pieces() -> Iterator[bytes]:
        yield sse({"type": "response.failed", "response": failed}, "response.failed")
        release.wait(60)

    gateway.upstream.respond = lambda path, body: Answer(pieces())
    try:
        lines = _all_lines(gateway, "held-failed", {"model": "m", "stream": True, "input": "hi"})
    finally:
        release.set()
    assert "event: response.failed" in lines
    assert texts(gateway.stored("held-failed")) == [("user", "hi")]
