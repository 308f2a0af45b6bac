"""A real HTTP server on a local socket that answers from a script, for wire-level provider tests.

Each request takes the next :class:`Reply` of the script: a JSON body, a raw body, or a
server-sent-event stream (chunked transfer encoding, as the providers send it), optionally
after a delay (to trip a client timeout) or cut off mid-stream (the connection closes
without the terminating chunk, which is what a dropped connection looks like to a client).
Every request is recorded with its path, headers and JSON body so tests can check what
obsmem put on the wire.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["MemoryModelPlayer", "Recorded", "Reply", "WireServer", "openai_text_stream", "sse", "wire_server"]


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    body: bytes | None = None
    events: list[str] | None = None  # each already framed, e.g. "data: {...}\n\n"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    cut_after: int | None = None  # stream: drop the connection after this many events


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


def sse(data: Any, event: str | None = None) -> str:
    """One framed server-sent event; ``data`` that is not a string is JSON-encoded."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"


class WireServer:
    """Scripted replies on ``url``; ``responder`` (if set) answers instead of the script."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.responder: Callable[[Recorded], Reply] | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self.responder is not None:
                return self.responder(recorded)
            if not self.replies:
                return Reply(status=599, json={"error": {"message": "the test script has no reply left"}})
            return self.replies.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                reply = server._next(
                    Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self._send(reply)
                except OSError:  # the client gave up (a timeout test); nothing to tell it
                    pass
                self.close_connection = True

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("connection", "close")
                if reply.events is None:
                    payload = reply.body if reply.body is not None else json.dumps(reply.json).encode()
                    if "content-type" not in {k.lower() for k in reply.headers}:
                        self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for index, event in enumerate(reply.events):
                    if reply.cut_after is not None and index >= reply.cut_after:
                        self.wfile.flush()
                        return  # no terminating chunk: the client sees a connection cut mid-body
                    data = event.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                if reply.cut_after is not None:
                    return
                self.wfile.write(b"0\r\n\r\n")

        return Handler

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@contextmanager
def wire_server() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


def openai_text_stream(text: str, *, model: str = "test-model", finish: str = "stop") -> Reply:
    """A complete Chat Completions stream answering ``text``, the way OpenAI frames it."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        return sse(
            {
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
        )

    words = text.split(" ")
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": word if i == 0 else " " + word}) for i, word in enumerate(words)]
    events.append(chunk({}, finish))
    events.append(
        sse(
            {
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": len(words)},
            }
        )
    )
    events.append(sse("[DONE]"))
    return Reply(events=events)


class MemoryModelPlayer:
    """Answers observer and reflector prompts with valid output, as a real model would.

    The observer gets one new dated observation per call (so memory grows); the reflector
    gets a two-line condensed log (so reflection visibly compresses). Requests are told apart
    by the reflector's system prompt, which speaks of consolidating the observer's log.
    """

    def __init__(self) -> None:
        self.observer_calls = 0
        self.reflector_calls = 0

    def __call__(self, request: Recorded) -> Reply:
        system = " ".join(
            m["content"]
            for m in request.body["messages"]
            if m["role"] == "system" and isinstance(m["content"], str)
        )
        if "parts of the same mind" in system:
            self.reflector_calls += 1
            text = (
                "<observations>\nDate: Jun 15, 2025\n* 🔴 (12:00) User is planning a trip and"
                f" compared options (condensed {self.reflector_calls}).\n</observations>"
            )
        else:
            self.observer_calls += 1
            n = self.observer_calls
            text = (
                f"<observations>\nDate: Jun 15, 2025\n* 🔴 (12:{n % 60:02d}) User shared detail number {n}"
                " about their plans, budget and preferred dates for the trip.\n"
                f"* 🟡 (12:{n % 60:02d}) Assistant suggested option {n}.\n</observations>\n"
                "<current-task>Help the user plan.</current-task>"
            )
        return openai_text_stream(text)
