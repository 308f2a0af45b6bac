"""Memory-model servers that answer in ways meant to hurt: bounded, typed, never held.

Found by a hostile review (each failed on main):

- A compressed answer expanded without limit before obsmem counted a byte: 32 KB of zstd (or
  2 KB of gzip-in-gzip) became a gigabyte in one decompression call on the event loop (3 GB of
  memory, loop stalls of 11–24 s), though the 8 MiB ``max_response_bytes`` counts decoded bytes.
  Now obsmem asks for gzip or deflate only and decodes them itself, a bounded step at a time;
  any other encoding, or more than one, is refused.
- ``OpenAIEmbedder``'s ``timeout_s`` bounded each read, not the request: a server sending one
  byte a second held ``embed`` (and ``Memory.recall``) for as long as it liked.
- A ``retry-after`` far past the retry deadline was shortened to ``max_delay_s`` and the request
  sent again 120 s later, where the README says it fails at once.
- Answers of an unexpected shape (JSON nested 100,000 deep, ``"choices": "abc"``) escaped as raw
  ``RecursionError`` / ``AttributeError`` / ``TypeError``; now a retryable
  :class:`~obsmem.errors.ModelUnavailableError`, as malformed JSON is.

Memory is counted with ``tracemalloc`` and time bounded by the server's own pace, never timed.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import zstandard

from obsmem.clock import FakeClock
from obsmem.embeddings.openai import OpenAIEmbedder
from obsmem.errors import ModelError, ModelUnavailableError, ObsmemError
from obsmem.models.anthropic import AnthropicModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.retry import RetryPolicy, with_retry
from obsmem.models.transport import Endpoint
from obsmem.types import Message

from ..loopback import serving
from .wire_server import Reply, WireServer, sse

pytestmark = pytest.mark.anyio

DECODED = 64 * 1024 * 1024  # what the bombs expand to: eight times the 8 MiB answer limit


def _zeros_gzip(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    return b"".join([*(packer.compress(block) for _ in range(size // len(block))), packer.flush()])


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[str, bytes]]:
    one = _zeros_gzip(DECODED)
    return {
        "gzip": ("gzip", one),
        "gzip-twice": ("gzip, gzip", gzip.compress(one)),
        "zstd": ("zstd", zstandard.ZstdCompressor().compress(bytes(DECODED))),
    }


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as wire:
        yield wire


@pytest.mark.parametrize("kind", ["gzip", "gzip-twice", "zstd"])
async def test_a_compressed_answer_never_expands_past_the_limit(
    server: WireServer, bombs: dict[str, tuple[str, bytes]], kind: str
) -> None:
    encoding, body = bombs[kind]
    server.script(Reply(body=body, headers={"content-encoding": encoding}))
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=False, timeout_s=10)
    tracemalloc.start()
    try:
        with pytest.raises(ModelError):
            await model.request([Message.user("hi")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 * 1024 * 1024, f"{peak / 2**20:.0f} MiB held to read a {len(body)}-byte {kind} answer"
    accepted = server.requests[0].headers.get("accept-encoding", "")
    assert {e.strip() for e in accepted.split(",")} <= {"gzip", "deflate", "identity"}, accepted


async def test_a_small_compressed_answer_is_read(server: WireServer) -> None:
    answer = {"choices": [{"message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}
    import json

    server.script(Reply(body=gzip.compress(json.dumps(answer).encode()), headers={"content-encoding": "gzip"}))
    server.script(Reply(body=zlib.compress(json.dumps(answer).encode()), headers={"content-encoding": "deflate"}))
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=False, timeout_s=10)
    for _ in range(2):
        assert (await model.request([Message.user("hi")])).text == "fine"


class _Trickle(BaseHTTPRequestHandler):
    """Answers 200 and then one byte every 0.2 s, for as long as the client reads."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(10_000))
        self.end_headers()
        try:
            for _ in range(10_000):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            return


@pytest.fixture
def trickle() -> Iterator[str]:
    with serving(_Trickle) as url:
        yield url + "/v1"


async def test_an_embeddings_request_is_bounded_in_all_by_its_timeout(trickle: str) -> None:
    embedder = OpenAIEmbedder("m", dimensions=8, base_url=trickle, max_retries=0, timeout_s=1.0)
    try:
        with pytest.raises(ModelUnavailableError, match="timed out"):
            # the guard only keeps a failing run from hanging; the embedder must stop by itself
            await asyncio.wait_for(embedder.embed(["hello"]), 15)
    finally:
        await embedder.aclose()


async def test_a_retry_after_past_the_deadline_fails_at_once(server: WireServer) -> None:
    server.script(Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "999999"}))
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=False, timeout_s=5)
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError, match="999999"):
        await with_retry(lambda: model.request([Message.user("hi")]), policy=RetryPolicy(), clock=clock)
    assert clock.sleeps == [] and len(server.requests) == 1


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body=DEEP),
        Reply(json={"choices": "abc"}),
        Reply(json={"choices": [{"message": [1]}]}),
        Reply(events=[sse({"choices": [{"delta": {"content": ["a", "b"]}}]}), "data: [DONE]\n\n"]),
        Reply(events=["data: " + DEEP.decode() + "\n\n"]),
    ],
    ids=["deep-json", "choices-a-string", "message-a-list", "content-a-list", "deep-event"],
)
async def test_an_answer_of_an_odd_shape_is_a_retryable_obsmem_error(server: WireServer, reply: Reply) -> None:
    server.script(reply)
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=reply.events is not None, timeout_s=5)
    with pytest.raises(ModelUnavailableError):
        await model.request([Message.user("hi")])


async def test_anthropic_and_embeddings_answers_nested_too_deep_are_obsmem_errors(server: WireServer) -> None:
    server.script(Reply(body=DEEP), Reply(body=DEEP))
    with pytest.raises(ModelUnavailableError):
        await AnthropicModel("m", Endpoint("anthropic", server.url), timeout_s=5).request([Message.user("hi")])
    embedder = OpenAIEmbedder("m", dimensions=8, base_url=server.url, max_retries=0, timeout_s=5)
    try:
        with pytest.raises(ObsmemError):
            await embedder.embed(["hi"])
    finally:
        await embedder.aclose()
