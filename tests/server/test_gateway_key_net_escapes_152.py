"""The upstream key echoed with '+' escaped as '\\u002B' still reaches no client (helper-152,
reviewing 55f6650).

55f6650 masked the key where an upstream's JSON encoder wrote each '/' as '\\/' (PHP). .NET's
System.Text.Json, by default, writes '+' (an HTML-sensitive character) as '\\u002B': an upstream
(or a proxy in front of it) built on ASP.NET that quotes the credential it refused sent a base64
key with '+' to the client whole, in the 401 body and in an error event mid-stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from obsmem.server import ServerSettings, Service
from tests.server.live import live_server, make_keys
from tests.server.test_gateway_streams import Answer, Gateway, Upstream, chunk, sse

KEY = "sk-proj/0123456789abcdef+SECRET/tail"


def _net(text: str, plus: str = "\\u002B") -> str:
    return text.replace("+", plus)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("key-net")
    upstream = Upstream()
    with upstream.running():
        service = Service.open(f"sqlite:///{path / 'memory.db'}", max_turn_wait=None,
                               settings=ServerSettings(upstream_url=upstream.url + "/v1", upstream_key=KEY))
        keys = make_keys(service)
        with live_server(service) as live:
            yield Gateway(live, keys, upstream)


def _leaks(text: str) -> bool:
    plain = text.replace("\\u002B", "+").replace("\\u002b", "+").replace("\\/", "/")
    return KEY in plain


@pytest.mark.parametrize("plus", ["\\u002B", "\\u002b"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_refusal_quoting_the_key_with_an_escaped_plus_is_masked(gateway: Gateway, stream: bool, plus: str) -> None:
    body = '{"error": {"message": "Incorrect API key provided: ' + _net(KEY, plus) + '", "type": "auth"}}'
    gateway.upstream.respond = lambda path, payload: Answer([body.encode()], status=401, media="application/json")
    with gateway.raw(f"net-{stream}-{plus[-1]}") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": stream, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 401
    assert not _leaks(response.text), response.text
    assert "Incorrect API key provided" in response.text


def test_an_error_event_quoting_the_key_with_an_escaped_plus_is_masked(gateway: Gateway) -> None:
    event = b"data: " + ('{"error": {"message": "auth expired for ' + _net(KEY) + '"}}').encode() + b"\n\n"
    gateway.upstream.respond = lambda path, payload: Answer([
        chunk({"role": "assistant", "content": "Hel"}), event, chunk({"content": "lo"}, "stop"), sse("[DONE]"),
    ])  # fmt: skip
    with gateway.raw("net-event") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert not _leaks(response.text), response.text
