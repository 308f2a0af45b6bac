"""The upstream key echoed back in another spelling than its own still reaches no client.

An upstream key may hold '/' or '+' (base64 secrets of some providers and proxies). An upstream
written with PHP's json_encode (or any encoder escaping '/') that quotes the credential it
refused writes 'sk-proj\\/abc…': the gateway masked only the key's exact bytes, so the client's
401 answer held the whole key with each '/' as '\\/', readable at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from obsmem.server import ServerSettings, Service
from tests.server.live import live_server, make_keys
from tests.server.test_gateway_streams import Answer, Gateway, Upstream, chunk, sse

KEY = "sk-proj/0123456789abcdef+SECRET/tail"


def _escaped(text: str) -> str:
    return text.replace("/", "\\/")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("key-forms")
    upstream = Upstream()
    with upstream.running():
        service = Service.open(f"sqlite:///{path / 'memory.db'}", max_turn_wait=None,
                               settings=ServerSettings(upstream_url=upstream.url + "/v1", upstream_key=KEY))
        keys = make_keys(service)
        with live_server(service) as live:
            yield Gateway(live, keys, upstream)


def _leaks(text: str) -> bool:
    return KEY in text or _escaped(KEY) in text or KEY in text.replace("\\/", "/")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_refusal_quoting_the_key_with_escaped_slashes_is_masked(gateway: Gateway, stream: bool) -> None:
    body = '{"error": {"message": "Incorrect API key provided: ' + _escaped(KEY) + '", "type": "auth"}}'
    gateway.upstream.respond = lambda path, payload: Answer([body.encode()], status=401, media="application/json")
    with gateway.raw(f"forms-{stream}") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": stream, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 401
    assert not _leaks(response.text), response.text  # was the whole key, '/' written '\/'
    assert "Incorrect API key provided" in response.text


def test_an_error_event_quoting_the_key_with_escaped_slashes_is_masked(gateway: Gateway) -> None:
    event = b"data: " + ('{"error": {"message": "auth expired for ' + _escaped(KEY) + '"}}').encode() + b"\n\n"
    gateway.upstream.respond = lambda path, payload: Answer([
        chunk({"role": "assistant", "content": "Hel"}), event, chunk({"content": "lo"}, "stop"), sse("[DONE]"),
    ])  # fmt: skip
    with gateway.raw("forms-event") as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert not _leaks(response.text), response.text
