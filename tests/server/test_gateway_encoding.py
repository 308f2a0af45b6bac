"""The gateway relays what it reads: it asks its upstream for an unencoded body.

Found in the final read of this session's gateway changes: the gateway relays the upstream's
raw bytes (``aiter_raw``) under its own headers, but its httpx client asked for ``gzip, deflate``
like any httpx client, and real upstreams (behind Cloudflare and most proxies) then compress. The
client got gzip bytes labelled as JSON or as an event stream, and the gateway could not read the
answer to save it. On main, against an upstream that compresses what the request accepts: the
``openai`` client failed to decode the answer, and only the user's message was saved.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from obsmem.server import ServerSettings, Service
from tests.loopback import serving
from tests.server.live import auth, live_server, make_keys

ANSWER = {
    "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lisbon, on Friday."}, "finish_reason": "stop"}],
}


class _Compressing(BaseHTTPRequestHandler):
    """Answers like a real server: gzip whenever the request accepts it."""

    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        accepted = self.headers.get("accept-encoding") or ""
        _Compressing.seen.append(accepted)
        body = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        if "gzip" in accepted:
            body = gzip.compress(body)
            self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def upstream() -> Iterator[str]:
    with serving(_Compressing) as url:
        yield url + "/v1"


def test_an_upstream_that_compresses_what_it_may_still_gives_a_readable_saved_answer(
    upstream: str, tmp_path: Path
) -> None:
    service = Service.open(f"sqlite:///{tmp_path / 'm.db'}", max_turn_wait=None,
                           settings=ServerSettings(upstream_url=upstream, upstream_key="sk-up"))  # fmt: skip
    keys = make_keys(service)
    with live_server(service) as live:
        client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                               default_headers={"X-Obsmem-Thread": "enc"}, timeout=30)  # fmt: skip
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Where and when?"}])
        assert answer.choices[0].message.content == "Lisbon, on Friday."
        live.call(service.memory.settled())
        with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=30) as http:
            stored = http.get("/api/threads/enc/messages").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert all("gzip" not in seen for seen in _Compressing.seen), _Compressing.seen


class _AlwaysCompressing(_Compressing):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = gzip.compress(json.dumps(ANSWER).encode())
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)


def test_an_upstream_that_compresses_anyway_is_refused_not_relayed(tmp_path: Path) -> None:
    with serving(_AlwaysCompressing) as url:
        service = Service.open(f"sqlite:///{tmp_path / 'm.db'}", max_turn_wait=None,
                               settings=ServerSettings(upstream_url=url + "/v1", upstream_key="sk-up"))  # fmt: skip
        keys = make_keys(service)
        with live_server(service) as live, httpx.Client(base_url=live.url, timeout=30) as http:
            response = http.post("/v1/chat/completions", headers={**auth(keys.alice), "X-Obsmem-Thread": "enc2"},
                                 json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
            assert response.status_code == 502, response.text
            assert "encoded" in response.json()["error"]["message"]
