"""A large upstream answer through the gateway must not hold up the server's event loop
(helper-122): the product rule is that no input blocks the loop.

Measured on main with a 25 MiB answer (whole or streamed, the offline observer): the client had
it in 3 s, but the loop stalled up to 2.2 s at once, first in counting the answer's tokens on the
loop thread (``turn.end`` → the quiet-step check's window count), where every other request of
the server waits. A megabyte of text takes tens of milliseconds to count; the turn's own input is
counted in a thread (``TokenCounter.warm``), the saved answer was not.

The test counts work, never time: the server's memory gets a token counter (the public
``Memory(counter=…)``) that notes on which thread each long text is counted, and no text of a
megabyte or more may be counted on the event loop's thread while the answer is saved and observed.
Both upstream kinds, whole and streamed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from obsmem.server import ServerSettings, Service
from obsmem.tokens import TokenCounter
from tests.server.live import live_server, make_keys
from tests.server.test_gateway_streams import (
    Answer,
    Gateway,
    Upstream,
    chunk,
    claude_end,
    claude_start,
    claude_text,
    sse,
)

LONG = 1024 * 1024  # a text this long is counted off the loop
BODY = ("The quarterly report lists every shipment in detail. " * (2 * LONG // 53 + 1))[: 2 * LONG]
PIECE = 64 * 1024


class WatchedCounter(TokenCounter):
    """A real token counter that notes the threads on which it counted a long text."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def count_text(self, text: str | None) -> int:
        if text and len(text) >= LONG:
            self.threads.append(threading.get_ident())
        return super().count_text(text)


def _open(path: Path, kind: str) -> Iterator[tuple[Gateway, WatchedCounter]]:
    upstream = Upstream()
    counter = WatchedCounter()
    with upstream.running():
        service = Service.open(f"sqlite:///{path / 'memory.db'}", counter=counter,
                               settings=ServerSettings(upstream_url=upstream.url + "/v1", upstream_key="sk-up",
                                                       upstream_kind=kind))  # fmt: skip
        keys = make_keys(service)
        with live_server(service) as live:
            yield Gateway(live, keys, upstream), counter


@pytest.fixture(scope="module")
def openai_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, WatchedCounter]]:
    yield from _open(tmp_path_factory.mktemp("large-openai"), "openai")


@pytest.fixture(scope="module")
def anthropic_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, WatchedCounter]]:
    yield from _open(tmp_path_factory.mktemp("large-anthropic"), "anthropic")


def _loop_thread(gateway: Gateway) -> int:
    async def ident() -> int:
        return threading.get_ident()

    return int(gateway.live.call(ident()))


def _settle(gateway: Gateway) -> None:
    service = gateway.live.service

    async def settled() -> None:
        while service.tasks:
            await asyncio.gather(*list(service.tasks), return_exceptions=True)
        await service.memory.settled()

    asyncio.run_coroutine_threadsafe(settled(), gateway.live.loop).result(600)  # type: ignore[arg-type]


def _ask(gateway: Gateway, thread: str, stream: bool) -> str:
    body: dict[str, Any] = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Report?"}]}
    with gateway.raw(thread) as client:
        client.timeout = 300
        if not stream:
            response = client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            return str(response.json()["choices"][0]["message"]["content"])
        text: list[str] = []
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    data = json.loads(line[6:])
                    assert "error" not in data, data
                    text += [c["delta"].get("content") or "" for c in data.get("choices", [])]
        return "".join(text)


def _text(case: str) -> str:
    """The answer's text, its own in each case (a text counted before is a cache lookup)."""
    return f"{case}: {BODY}"


def _check(gateway: Gateway, counter: WatchedCounter, thread: str, stream: bool) -> None:
    loop = _loop_thread(gateway)
    counter.threads.clear()
    assert _ask(gateway, thread, stream) == _text(thread)
    _settle(gateway)
    saved = gateway.stored(thread)
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert counter.threads, "the answer was never counted"  # the check below sees the counts
    on_loop = sum(1 for ident in counter.threads if ident == loop)
    assert on_loop == 0, f"{on_loop} of {len(counter.threads)} counts of a long text ran on the event loop"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_large_openai_answer_is_counted_off_the_loop(
    openai_gateway: tuple[Gateway, WatchedCounter], stream: bool
) -> None:
    """On main: 1 of the counts of the answer ran on the event loop (turn.end's quiet check)."""
    gateway, counter = openai_gateway
    thread = f"large-openai-{stream}"
    text = _text(thread)
    if stream:
        pieces = [chunk({"role": "assistant", "content": ""}),
                  *(chunk({"content": text[i : i + PIECE]}) for i in range(0, len(text), PIECE)),
                  chunk({}, "stop"), sse("[DONE]")]  # fmt: skip
        gateway.upstream.respond = lambda path, body: Answer(pieces)
    else:
        whole = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}]}).encode()  # fmt: skip
        gateway.upstream.respond = lambda path, body: Answer([whole], media="application/json")
    _check(gateway, counter, thread, stream)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_large_anthropic_answer_is_counted_off_the_loop(
    anthropic_gateway: tuple[Gateway, WatchedCounter], stream: bool
) -> None:
    """On main: 1 of the counts of the answer ran on the event loop."""
    gateway, counter = anthropic_gateway
    thread = f"large-anthropic-{stream}"
    text = _text(thread)
    if stream:
        pieces = [*claude_start(), *claude_text(0, *(text[i : i + PIECE] for i in range(0, len(text), PIECE))),
                  *claude_end("end_turn")]  # fmt: skip
        gateway.upstream.respond = lambda path, body: Answer(pieces)
    else:
        whole = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                            "usage": {"input_tokens": 5, "output_tokens": 9}}).encode()  # fmt: skip
        gateway.upstream.respond = lambda path, body: Answer([whole], media="application/json")
    _check(gateway, counter, thread, stream)
