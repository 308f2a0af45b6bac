"""A local HTTP server that answers like OpenAI's ``POST /v1/embeddings``, on a real socket.

Each test scripts the replies it wants (status, headers, body) in order; once the script
runs out, the server answers correctly with deterministic vectors derived from the input
text, so batching and ordering can be checked. Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict[str, Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    cut_after_headers: bool = False  # announce a body, then close the socket without sending it


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def text_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic, text-dependent vector (not normalised, so the client must normalise)."""
    seed = hashlib.sha256(text.encode()).digest()
    return [float(seed[i % len(seed)]) - 100.0 for i in range(dimensions)]


class FakeOpenAI:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.dimensions = 8
        self._lock = threading.Lock()
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        inputs = body.get("input", [])
        dims = int(body.get("dimensions", self.dimensions))
        data = [
            {"object": "embedding", "index": i, "embedding": text_vector(t, dims)}
            for i, t in enumerate(inputs)
        ]
        data.reverse()  # OpenAI does not promise order; the client must use "index"
        return Reply(
            body={
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": 3, "total_tokens": 3},
            }
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw) if raw else {}
                fake.requests.append(
                    Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = fake.next_reply(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.cut_after_headers:
                    self.send_header("Content-Length", str(len(payload) + 1000))
                    self.end_headers()
                    self.wfile.write(payload[:10])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join(timeout=5)
