"""An upstream's rate-limit answer through the gateway keeps its retry hints (helper-122's hostile
review): ``retry-after`` / ``retry-after-ms`` (which the ``openai`` client honours when it retries a
429 by itself, as the README says it does), ``x-should-retry``, and the rate-limit headers that say
when the limit resets (OpenAI's ``x-ratelimit-*``, Anthropic's ``anthropic-ratelimit-*``).

On main the gateway relayed the error's status and body but none of its headers: the client,
told nothing, retried on its own short backoff (0.5-8 s) into the same limit, and gave up while
the upstream had said to wait. Nothing else of the upstream's headers is passed on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from obsmem.server import ServerSettings, Service
from tests.models.wire_server import Reply, WireServer
from tests.server.live import LiveServer, Keys, auth, live_server, make_keys

HINTS = {"retry-after": "7", "retry-after-ms": "7000", "x-should-retry": "true",
         "x-ratelimit-reset-requests": "7s", "anthropic-ratelimit-requests-reset": "2026-12-05T07:00:00Z"}  # fmt: skip
PRIVATE = {"set-cookie": "upstream-session=abc", "x-upstream-internal": "node-7"}


def _open(path: Path, kind: str) -> Iterator[tuple[LiveServer, Keys, WireServer]]:
    with WireServer() as upstream:
        upstream.responder = lambda request: Reply(status=429, headers={**HINTS, **PRIVATE},
                                                   json={"error": {"type": "rate_limit_error", "message": "slow"}})  # fmt: skip
        service = Service.open(f"sqlite:///{path / 'memory.db'}", max_turn_wait=None,
                               settings=ServerSettings(upstream_url=upstream.url + "/v1", upstream_key="sk-up",
                                                       upstream_kind=kind))  # fmt: skip
        keys = make_keys(service)
        with live_server(service) as live:
            yield live, keys, upstream


@pytest.fixture(scope="module", params=["openai", "anthropic"])
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Keys, WireServer]]:
    yield from _open(tmp_path_factory.mktemp(f"retry-after-{request.param}"), request.param)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_rate_limited_answer_keeps_its_retry_hints(gateway: tuple[LiveServer, Keys, WireServer], stream: bool) -> None:
    """On main: none of the hints came through (headers: content-type and length only)."""
    live, keys, _ = gateway
    with httpx.Client(base_url=live.url, timeout=30,
                      headers={**auth(keys.alice), "X-Obsmem-Thread": f"limited-{stream}"}) as client:  # fmt: skip
        response = client.post("/v1/chat/completions", json={
            "model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code == 429
    assert {name: response.headers.get(name) for name in HINTS} == HINTS
    assert not any(name in response.headers for name in PRIVATE)
