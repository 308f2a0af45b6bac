"""The gateway against upstreams that misbehave mid-answer, seen from the user's side: the official
``openai`` client (or raw httpx) against a live gateway whose upstream is a real local HTTP server
that cuts streams, reports errors mid-stream, trickles, or sends oddly shaped events.

What the gateway promises (README, "Run obsmem as a service"): the answer reaches the client as
the upstream sent it, and memory holds what the user saw as a finished answer. A stream that does
not complete (cut, failed, past the deadline, unreadable) saves no answer, so a retry of the same
request is recognised as a retry and its input is saved once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from obsmem.server import ServerSettings, Service
from obsmem.server.gateway import ChatAnswer
from tests.integrity.work_count import GROWTH_BOUND, growth
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


# -- a real upstream that misbehaves on purpose ---------------------------------------------------


@dataclass
class Answer:
    """One upstream answer: ``pieces`` sent as they come (each one HTTP chunk, so a generator may
    pause between them); ``cut``: the connection closes without the terminating chunk."""

    pieces: Iterable[bytes]
    status: int = 200
    media: str = "text/event-stream"
    cut: bool = False


@dataclass
class Upstream:
    """A loopback HTTP server answering each POST with ``respond(path, body)``."""

    respond: Callable[[str, Any], Answer] = lambda path, body: Answer([])
    requests: list[tuple[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"null")
                upstream.requests.append((self.path, body))
                answer = upstream.respond(self.path, body)
                self.close_connection = True
                try:
                    self.send_response(answer.status)
                    self.send_header("content-type", answer.media)
                    self.send_header("transfer-encoding", "chunked")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for piece in answer.pieces:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                    if not answer.cut:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the gateway hung up (a deadline test): nothing more to send
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[Upstream]:
        thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._httpd.shutdown()
            self._httpd.server_close()


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode()


def chunk(delta: Any, finish: str | None = None) -> bytes:
    return sse({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


def claude(name: str, data: dict[str, Any]) -> bytes:
    return sse({"type": name, **data}, name)


def claude_start() -> list[bytes]:
    return [claude("message_start", {"message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": "claude", "content": [],
                                                 "usage": {"input_tokens": 5, "output_tokens": 0}}})]  # fmt: skip


def claude_text(index: int, *texts: str) -> list[bytes]:
    return [claude("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}),
            *(claude("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": t}})
              for t in texts)]  # fmt: skip


def claude_tool(index: int, name: str, *json_pieces: str) -> list[bytes]:
    return [claude("content_block_start", {"index": index, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": name, "input": {}}}),
            *(claude("content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": p}})
              for p in json_pieces)]  # fmt: skip


def claude_end(stop: str) -> list[bytes]:
    return [claude("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}),
            claude("message_stop", {})]  # fmt: skip


# -- a live gateway over it -----------------------------------------------------------------------


@dataclass
class Gateway:
    live: LiveServer
    keys: Keys
    upstream: Upstream

    def client(self, thread: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.live.url + "/v1", api_key=self.keys.alice, max_retries=0,
                             default_headers={"X-Obsmem-Thread": thread}, timeout=30)  # fmt: skip

    def raw(self, thread: str) -> httpx.Client:
        return httpx.Client(base_url=self.live.url, timeout=30,
                            headers={**auth(self.keys.alice), "X-Obsmem-Thread": thread})  # fmt: skip

    def stored(self, thread: str) -> list[dict[str, Any]]:
        """The thread's messages, once the saves begun off the request (a cut stream) are done."""
        service = self.live.service

        async def settled() -> None:
            while service.tasks:
                await asyncio.gather(*list(service.tasks), return_exceptions=True)
            await service.memory.settled()

        self.live.call(settled())
        with httpx.Client(base_url=self.live.url, headers=auth(self.keys.alice), timeout=30) as client:
            messages: list[dict[str, Any]] = client.get(f"/api/threads/{thread}/messages").json()["messages"]
        return messages


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], " ".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")) for m in messages]


def open_gateway(path: Path, **settings: Any) -> Iterator[Gateway]:
    upstream = Upstream()
    with upstream.running():
        service = Service.open(f"sqlite:///{path / 'memory.db'}", max_turn_wait=None,
                               settings=ServerSettings(upstream_url=upstream.url + "/v1", upstream_key="sk-up",
                                                       **settings))  # fmt: skip
        keys = make_keys(service)
        with live_server(service) as live:
            yield Gateway(live, keys, upstream)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("streams"))


@pytest.fixture(scope="module")
def anthropic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("streams-anthropic"), upstream_kind="anthropic")


#: The deadline tests' settings: one read may wait 1 s, the whole exchange 1.5 s.
READ_S, TOTAL_S = 1.0, 1.5


@pytest.fixture(scope="module")
def deadline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("streams-deadline"), upstream_timeout_s=READ_S,
                            upstream_total_timeout_s=TOTAL_S)  # fmt: skip


# -- 1. a cut stream ------------------------------------------------------------------------------


def test_a_cut_stream_saves_no_answer_and_its_retry_saves_the_input_once(gateway: Gateway) -> None:
    """On main: the cut-off 'The answer is definitely NOT' was saved as an assistant message and the
    retry saved the user's message a second time ([user, assistant(partial), user, assistant])."""
    attempts = []

    def respond(path: str, body: Any) -> Answer:
        attempts.append(body)
        head = [chunk({"role": "assistant", "content": "The answer is"}), chunk({"content": " definitely NOT"})]
        if len(attempts) == 1:
            return Answer(head, cut=True)  # the upstream's connection drops mid-answer
        return Answer([*head, chunk({"content": " 42."}), chunk({}, "stop"), sse("[DONE]")])

    gateway.upstream.respond = respond
    client = gateway.client("s-cut")
    question: Any = [{"role": "user", "content": "What is the answer?"}]
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for _ in client.chat.completions.create(model="m", stream=True, messages=question):
            pass
    assert texts(gateway.stored("s-cut")) == [("user", "What is the answer?")]
    retried = client.chat.completions.create(model="m", stream=True, messages=question)
    assert "".join(c.choices[0].delta.content or "" for c in retried if c.choices) == "The answer is definitely NOT 42."
    assert texts(gateway.stored("s-cut")) == [
        ("user", "What is the answer?"), ("assistant", "The answer is definitely NOT 42."),
    ]  # fmt: skip


def test_a_stream_ending_without_finish_or_done_saves_no_answer(gateway: Gateway) -> None:
    """On main: the unfinished 'Half an' was saved as a normal assistant message. (The client
    also hears the stream was cut: tests/server/test_gateway_read_failures.py.)"""
    gateway.upstream.respond = lambda path, body: Answer([chunk({"role": "assistant", "content": "Half an"})])
    stream = gateway.client("s-unfinished").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "Tell me"}])  # fmt: skip
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    assert texts(gateway.stored("s-unfinished")) == [("user", "Tell me")]


def test_a_stream_with_done_but_no_finish_reason_is_saved(gateway: Gateway) -> None:
    """A completed stream ([DONE]) from a server that sends no finish_reason is still an answer.
    (Passed on main too: it guards the completion rule against being too strict.)"""
    gateway.upstream.respond = lambda path, body: Answer([chunk({"role": "assistant", "content": "Whole"}),
                                                          sse("[DONE]")])  # fmt: skip
    stream = gateway.client("s-done").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "Go"}])  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Whole"
    assert texts(gateway.stored("s-done")) == [("user", "Go"), ("assistant", "Whole")]


# -- 2. an Anthropic error mid-stream -------------------------------------------------------------


def test_an_anthropic_error_mid_stream_reaches_the_client_and_saves_nothing(anthropic: Gateway) -> None:
    """On main: the client saw a normal end of stream (no error, no finish_reason), and the partial
    text plus a tool call 'transfer' with input {} (its arguments cut off) were saved."""
    anthropic.upstream.respond = lambda path, body: Answer([
        *claude_start(), *claude_text(0, "Transfer 100 EUR to"),
        *claude_tool(1, "transfer", '{"amount": 100, "to": "IBAN'),
        claude("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ])  # fmt: skip
    received = []
    with pytest.raises(openai.APIError) as raised:
        for piece in anthropic.client("a-error").chat.completions.create(
            model="claude", stream=True, messages=[{"role": "user", "content": "pay my rent"}]
        ):
            received.append(piece)
    assert "overloaded_error" in str(raised.value)
    assert any(c.choices and c.choices[0].delta.content == "Transfer 100 EUR to" for c in received)
    stored = anthropic.stored("a-error")
    assert texts(stored) == [("user", "pay my rent")]
    assert not any(p["type"] == "tool-call" for m in stored for p in m["parts"])


def test_an_anthropic_tool_call_with_cut_off_arguments_is_never_saved(anthropic: Gateway) -> None:
    """On main: the answer stopped at max_tokens inside the tool call's arguments, and the call was
    saved as a real call 'transfer' with input {}."""
    anthropic.upstream.respond = lambda path, body: Answer([
        *claude_start(), *claude_text(0, "Paying now."), *claude_tool(1, "transfer", '{"amount": 10'),
        *claude_end("max_tokens"),
    ])  # fmt: skip
    stream = anthropic.client("a-cut-args").chat.completions.create(
        model="claude", stream=True, messages=[{"role": "user", "content": "pay"}])  # fmt: skip
    assert [c.choices[0].finish_reason for c in stream if c.choices][-1] == "length"
    stored = anthropic.stored("a-cut-args")
    assert texts(stored) == [("user", "pay"), ("assistant", "Paying now.")]
    assert not any(p["type"] == "tool-call" for m in stored for p in m["parts"])


def test_a_cut_anthropic_stream_saves_no_answer(anthropic: Gateway) -> None:
    """On main: the cut-off 'Half' was saved as a normal assistant message."""
    anthropic.upstream.respond = lambda path, body: Answer([*claude_start(), *claude_text(0, "Half")], cut=True)
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for _ in anthropic.client("a-cut").chat.completions.create(
            model="claude", stream=True, messages=[{"role": "user", "content": "Tell me"}]
        ):
            pass
    assert texts(anthropic.stored("a-cut")) == [("user", "Tell me")]


# -- 3. a Responses stream ending in response.incomplete ------------------------------------------


def test_a_responses_stream_ending_incomplete_is_saved_like_the_whole_answer(gateway: Gateway) -> None:
    """On main: the non-streamed answer was saved, the streamed one (ending in response.incomplete)
    was not: the thread held only the user's message."""
    response = {"id": "resp_1", "object": "response", "status": "incomplete", "model": "m",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "incomplete",
                            "content": [{"type": "output_text", "text": "Your flight leaves at 9",
                                         "annotations": []}]}]}  # fmt: skip

    def respond(path: str, body: Any) -> Answer:
        if not body.get("stream"):
            return Answer([json.dumps(response).encode()], media="application/json")
        return Answer([
            sse({"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
                "response.created"),
            sse({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                 "delta": "Your flight leaves at 9"}, "response.output_text.delta"),
            sse({"type": "response.incomplete", "response": response}, "response.incomplete"),
        ])  # fmt: skip

    gateway.upstream.respond = respond
    whole = gateway.client("r-whole").responses.create(model="m", input="When is my flight?")
    assert whole.status == "incomplete"
    events = list(gateway.client("r-stream").responses.create(model="m", input="When is my flight?", stream=True))
    assert events[-1].type == "response.incomplete"
    expected = [("user", "When is my flight?"), ("assistant", "Your flight leaves at 9")]
    assert texts(gateway.stored("r-whole")) == expected
    assert texts(gateway.stored("r-stream")) == expected


# -- 4. a total deadline on one upstream exchange -------------------------------------------------


def _trickle(first: list[bytes], keep_alive: bytes, bound: int = 40) -> Iterator[bytes]:
    """``first``, then ``keep_alive`` every 0.25 s (well inside the read timeout) ``bound`` times
    (10 s: far past the deadline; a bound so a gateway without one fails instead of hanging)."""
    yield from first
    for _ in range(bound):
        time.sleep(0.25)
        yield keep_alive


def test_a_trickling_stream_ends_at_the_total_deadline_with_an_error(deadline: Gateway) -> None:
    """On main: keep-alive comments held the stream open until the upstream itself stopped (10 s,
    past any deadline); the client saw no error and the stream ended as if normally."""
    deadline.upstream.respond = lambda path, body: Answer(
        _trickle([chunk({"role": "assistant", "content": "thinking"})], b": keep-alive\n\n"))
    received = []
    with pytest.raises(openai.APIError) as raised:
        for piece in deadline.client("d-stream").chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "hi"}]
        ):
            received.append(piece)
    assert "UpstreamTimeoutError" in json.dumps(raised.value.body) and f"{TOTAL_S:g}" in raised.value.message
    assert [c.choices[0].delta.content for c in received if c.choices] == ["thinking"]
    assert texts(deadline.stored("d-stream")) == [("user", "hi")]


def test_a_trickling_whole_answer_gets_504_at_the_total_deadline(deadline: Gateway) -> None:
    """On main: a body sent one byte at a time held the request until the upstream stopped (10 s)
    and then answered with whatever had come (here 200 with an unreadable body)."""
    deadline.upstream.respond = lambda path, body: Answer(_trickle([b'{"id": "x", '], b" "), media="application/json")
    with deadline.raw("d-whole") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["type"] == "UpstreamTimeoutError" and f"{TOTAL_S:g}" in error["message"]
    assert texts(deadline.stored("d-whole")) == [("user", "hi")]


def test_an_answer_within_the_deadline_is_untouched(deadline: Gateway) -> None:
    """The deadline server still relays and saves an answer that comes in time (passed on main)."""
    deadline.upstream.respond = lambda path, body: Answer([chunk({"role": "assistant", "content": "Quick"}),
                                                           chunk({}, "stop"), sse("[DONE]")])  # fmt: skip
    stream = deadline.client("d-quick").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Quick"
    assert texts(deadline.stored("d-quick")) == [("user", "hi"), ("assistant", "Quick")]


def test_obsmem_serve_takes_both_upstream_timeouts(tmp_path: Path) -> None:
    """On main: 'No such option: --upstream-timeout-s' (exit 2; the server never started)."""
    upstream = Upstream(lambda path, body: Answer(_trickle([b'{"id": "x", '], b" "), media="application/json"))
    root = Path(__file__).resolve().parents[2]
    with upstream.running():
        process = subprocess.Popen(
            [sys.executable, "-m", "obsmem", "serve", "--dev", "--port", "0", "--store",
             f"sqlite:///{tmp_path / 'm.db'}", "--upstream", upstream.url + "/v1",
             "--upstream-timeout-s", f"{READ_S:g}", "--upstream-total-timeout-s", f"{TOTAL_S:g}"],
            cwd=root, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(root / "src")},
        )  # fmt: skip
        try:
            assert process.stdout is not None
            lines: list[str] = []
            for line in process.stdout:  # ends when the process exits, so a failed start cannot hang
                lines.append(line)
                if found := re.search(r"Uvicorn running on (http://\S+)", line):
                    break
            else:
                raise AssertionError("".join(lines))
            response = httpx.post(found.group(1) + "/v1/chat/completions", timeout=30,
                                  headers={"X-Obsmem-Thread": "cli", "X-Obsmem-Resource": "me"},
                                  json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        finally:
            process.terminate()
            process.wait(60)
    assert response.status_code == 504
    assert f"within {TOTAL_S:g} s" in response.json()["error"]["message"]


def test_the_readme_documents_both_upstream_timeouts() -> None:
    """On main: the README named neither timeout."""
    assert "--upstream-timeout-s" in README and "--upstream-total-timeout-s" in README


# -- 5. oddly shaped events -----------------------------------------------------------------------

ODD = {
    "tool index null": {"tool_calls": [{"index": None, "id": "call_1", "type": "function",
                                        "function": {"name": "f", "arguments": "{}"}}]},  # fmt: skip
    "delta a string": "oops",
    "function a string": {"tool_calls": [{"index": 0, "id": "call_1", "function": "f"}]},
    "name a number": {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": 7, "arguments": "{}"}}]},
}


@pytest.mark.parametrize("shape", list(ODD))
def test_an_odd_event_passes_through_unchanged_and_saves_no_answer(gateway: Gateway, shape: str) -> None:
    """On main: TypeError/AttributeError in the answer accumulator aborted the relay (the client got
    0 bytes and a RemoteProtocolError)."""
    events = [chunk({"role": "assistant", "content": "Hello"}), chunk(ODD[shape]), chunk({"content": " world"}),
              chunk({}, "stop"), sse("[DONE]")]  # fmt: skip
    gateway.upstream.respond = lambda path, body: Answer(events)
    thread = "o-" + shape.replace(" ", "-")
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with gateway.raw(thread) as client, client.stream("POST", "/v1/chat/completions", json=body) as response:
        relayed = b"".join(response.iter_raw())
    assert relayed == b"".join(events)
    assert texts(gateway.stored(thread)) == [("user", "hi")]


# -- 6. streamed tool-call arguments in linear work -----------------------------------------------


class _Piece(str):
    """A piece of streamed arguments that makes the copy ``text += piece`` does visible to the work
    counter: joined onto assembled text, it walks that text in Python, one counted line per
    character copied (the copy itself happens inside one C call, which the counter cannot see)."""

    def __radd__(self, other: str) -> str:
        for _ in other:
            pass
        return str.__add__(other, self)


def _assemble(size: str) -> None:
    """A tool call whose arguments arrive in ``len(size) // 4`` deltas of 4 characters, fed to the
    accumulator as the relay feeds it."""
    answer = ChatAnswer()
    answer.chunk({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": ""}}]}}]})  # fmt: skip
    for _ in range(len(size) // 4):
        answer.chunk({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": _Piece("x" * 4)}}]}}]})  # fmt: skip
    answer.chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    (message,) = answer.messages([])
    assert message.parts


def test_streamed_tool_arguments_assemble_in_linear_work() -> None:
    """On main: 16.0x the work for 4x the deltas (each delta copied all the arguments so far)."""
    ratio = growth(_assemble, lambda size: "x" * size, 8_000)
    assert ratio < GROWTH_BOUND, f"{ratio:.1f}x the work for 4x the deltas"


# -- 7. the README on Anthropic streaming ---------------------------------------------------------


def test_the_readme_tells_how_an_anthropic_stream_arrives(anthropic: Gateway) -> None:
    """On main: the README said a streaming client 'gets the answer in one chunk'; it got 4."""
    anthropic.upstream.respond = lambda path, body: Answer([
        *claude_start(), *claude_text(0, "Hello", " there", ", friend", "."), *claude_end("end_turn")])  # fmt: skip
    stream = anthropic.client("a-doc").chat.completions.create(
        model="claude", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert pieces == ["Hello", " there", ", friend", "."]
    sentence = re.search(r"With `--upstream-kind anthropic`.*?\.(?=\s[A-Z])", README, re.S)
    assert sentence is not None
    claim = " ".join(sentence.group(0).split())
    assert "one chunk" not in claim and "as the upstream sends" in claim, claim
