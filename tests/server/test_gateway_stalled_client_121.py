"""A client that opens a streamed answer and stops reading it (helper-121's hostile review).

README: ``--upstream-total-timeout-s`` bounds one whole upstream answer. On main the bound counted
only the gateway's waits for the upstream: a client that stopped reading (a hung agent, a hostile
one holding its socket open) stalled the relay in its write to the client, so the gateway stopped
reading the upstream too and held the upstream connection, and the turn, for as long as the client
liked. The upstream's own write then blocked forever, and a hundred such clients filled the
gateway's upstream connection pool for everyone. Past the deadline the gateway now lets go of the
upstream (its connection is closed) and ends the turn, whatever the client does.

The upstream here is a real local server whose write to the gateway fails once the gateway closes
the connection; the test waits for that, with a bounded wait only as a guard.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.test_gateway_streams import (
    Answer, Gateway, chunk, claude, claude_start, claude_text, open_gateway, texts,
)  # fmt: skip

#: The gateway's bounds here: a read may wait 2 s, one upstream answer 2 s in all.
READ_S, TOTAL_S = 2.0, 2.0
#: The guard on waiting for the gateway to let go (main never did).
GUARD_S = 60.0


@pytest.fixture(scope="module", params=["openai", "anthropic"])
def gateway(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("stalled-client"), upstream_timeout_s=READ_S,
                            upstream_total_timeout_s=TOTAL_S, upstream_kind=request.param)  # fmt: skip


def test_a_client_that_stops_reading_does_not_hold_the_upstream_past_the_deadline(gateway: Gateway) -> None:
    """On main: the upstream's write was still blocked after the 60 s guard (connection held)."""
    let_go = threading.Event()
    anthropic = gateway.live.service.settings.upstream_kind == "anthropic"
    piece = (claude("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "x" * 60_000}})
             if anthropic else chunk({"content": "x" * 60_000}))  # fmt: skip

    def flood() -> Iterator[bytes]:
        yield from [*claude_start(), *claude_text(0, "Start.")] if anthropic else [
            chunk({"role": "assistant", "content": "Start."})]  # fmt: skip
        try:
            for _ in range(400):  # about 24 MB: far more than the sockets between them buffer
                yield piece
        finally:
            let_go.set()  # the generator is closed when the handler's write fails (or it ends)

    gateway.upstream.respond = lambda path, body: Answer(flood())
    host, port = gateway.live.url.removeprefix("http://").split(":")
    request: Any = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "flood me"}]}
    payload = json.dumps(request).encode()
    client = socket.create_connection((host, int(port)))
    try:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {gateway.keys.alice}\r\nX-Obsmem-Thread: stalled\r\n".encode()
            + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload
        )
        # ... and never read the answer.
        assert let_go.wait(GUARD_S), "the gateway still held the upstream connection"
    finally:
        client.close()
    assert texts(gateway.stored("stalled")) == [("user", "flood me")]
