"""The gateway's upstream key against an upstream that echoes it (helper-121's hostile review).

README: "the upstream key never leaves the server". Some upstreams (a misconfigured proxy, a
debugging server, a gateway that quotes the credential it refused) put the ``Authorization``
value they received into their error body. On main the gateway relayed such bodies byte for byte,
so every client of the gateway read the server's upstream key: in a 401 answer, in a 429 relayed
to a streaming request, in an error event mid-stream, and (Anthropic upstream) in the error event
the gateway writes from the upstream's message. The key is now masked (``sk-…WXYZ``) in whatever
of the upstream's answer is relayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from obsmem.server import ServerSettings, Service
from tests.server.live import auth, live_server, make_keys
from tests.server.test_gateway_streams import Answer, Gateway, Upstream, chunk, claude, claude_start, claude_text, sse

KEY = "sk-upstream-0123456789abcdefSECRET"


def _open(path: Path, **settings: Any) -> Iterator[Gateway]:
    upstream = Upstream()
    with upstream.running():
        service = Service.open(f"sqlite:///{path / 'memory.db'}", max_turn_wait=None,
                               settings=ServerSettings(upstream_url=upstream.url + "/v1", upstream_key=KEY,
                                                       **settings))  # fmt: skip
        keys = make_keys(service)
        with live_server(service) as live:
            yield Gateway(live, keys, upstream)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from _open(tmp_path_factory.mktemp("echo"))


@pytest.fixture(scope="module")
def anthropic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from _open(tmp_path_factory.mktemp("echo-anthropic"), upstream_kind="anthropic")


def _refusal(path: str, body: Any) -> Answer:
    error = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}
    return Answer([json.dumps(error).encode()], status=401, media="application/json")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_error_answer_echoing_the_upstream_key_reaches_the_client_masked(gateway: Gateway, stream: bool) -> None:
    """On main: the client's 401 body held the upstream key in full."""
    gateway.upstream.respond = _refusal
    with gateway.raw(f"echo-{stream}") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": stream, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 401
    assert KEY not in response.text
    assert "Incorrect API key provided: sk-…CRET" in response.text  # the rest of the message is kept


def test_a_responses_error_echoing_the_upstream_key_reaches_the_client_masked(gateway: Gateway) -> None:
    """On main: the client's 401 body held the upstream key in full."""
    gateway.upstream.respond = _refusal
    with gateway.raw("echo-responses") as client:
        response = client.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert response.status_code == 401 and KEY not in response.text


def test_an_error_event_echoing_the_upstream_key_mid_stream_is_masked(gateway: Gateway) -> None:
    """On main: the error event relayed mid-stream held the upstream key in full."""
    gateway.upstream.respond = lambda path, body: Answer([
        chunk({"role": "assistant", "content": "Hel"}),
        sse({"error": {"message": f"upstream auth expired for {KEY}", "code": 500}}),
        chunk({"content": "lo"}, "stop"), sse("[DONE]"),
    ])  # fmt: skip
    with gateway.raw("echo-event") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 200
    assert KEY not in response.text
    assert "upstream auth expired for sk-…CRET" in response.text


def test_an_anthropic_error_echoing_the_upstream_key_is_masked(anthropic: Gateway) -> None:
    """On main: both the relayed 401 and the error event the gateway wrote held the key in full."""
    anthropic.upstream.respond = _refusal
    with anthropic.raw("echo-a-whole") as client:
        response = client.post("/v1/chat/completions", json={"model": "claude", "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 401 and KEY not in response.text
    anthropic.upstream.respond = lambda path, body: Answer([
        *claude_start(), *claude_text(0, "Hi"),
        claude("error", {"error": {"type": "authentication_error", "message": f"key {KEY} revoked"}}),
    ])  # fmt: skip
    with anthropic.raw("echo-a-stream") as client:
        response = client.post("/v1/chat/completions", json={"model": "claude", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert KEY not in response.text
    assert "revoked" in response.text


def test_the_client_key_still_authenticates(gateway: Gateway) -> None:
    """Guard: masking never touches the client's side (its own key, its request)."""
    gateway.upstream.respond = lambda path, body: Answer([chunk({"role": "assistant", "content": "ok"}, "stop"),
                                                          sse("[DONE]")])  # fmt: skip
    with gateway.raw("echo-ok") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]}, headers=auth(gateway.keys.alice))  # fmt: skip
    assert response.status_code == 200 and response.text.endswith("data: [DONE]\n\n")
