"""Bodies a client can send that broke a thread or the server (found by a hostile review of the
service surfaces, against a live ``obsmem serve``).

* A lone surrogate (``"\\ud800"``: valid JSON, not Unicode text) in a message: on main the write
  answered 500 but the message was stored, and from then on every read of the thread
  (messages, context, the resource's export) and every gateway turn on it answered 500: the
  JSON of the answer could not be encoded. Now it is refused (400) before anything is stored,
  through REST and through the gateway, and the thread reads as before.
* Deeply nested JSON to the gateway: on main 500 after 1.6-2.5 s (a ``RecursionError`` out of
  ``request.json()``, logged with its whole traceback). Now a 400, as ``/api`` answers it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.live import auth
from tests.server.test_gateway_streams import Gateway, open_gateway

SURROGATE_TEXT = '{"role": "user", "content": "hi \\ud800 there"}'


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("hostile-bodies"))


def _post(client: httpx.Client, path: str, body: str, **headers: str) -> httpx.Response:
    return client.post(path, content=body.encode(), headers={"Content-Type": "application/json", **headers})


def test_a_lone_surrogate_is_refused_and_the_thread_still_reads(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.live.url, headers=auth(gateway.keys.alice), timeout=30) as client:
        assert client.post("/api/threads", json={"id": "s-rest"}).status_code == 201
        assert client.post("/api/threads/s-rest/messages", json={"format": "openai", "messages": [
            {"role": "user", "content": "a fine first message"}]}).status_code in (200, 201)
        for body in (
            '{"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi \\ud800 there"}]}]}',
            f'{{"format": "openai", "messages": [{SURROGATE_TEXT}]}}',
            '{"messages": [{"role": "assistant", "parts": [{"type": "tool-call", "tool_call_id": "c1", '
            '"tool_name": "f", "args": {"k\\udfff": "v"}}]}]}',
        ):
            answer = _post(client, "/api/threads/s-rest/messages", body)
            assert answer.status_code == 400, answer.text  # on main: 500, and the message stored
            assert "surrogate" in answer.json()["error"]["message"]
        read = client.get("/api/threads/s-rest/messages")
        assert read.status_code == 200, read.text  # on main: 500 for good
        assert [m["parts"][0]["text"] for m in read.json()["messages"]] == ["a fine first message"]
        assert client.get("/api/threads/s-rest/context").status_code == 200
        assert client.get("/api/resources/alice/export").status_code == 200


def test_a_lone_surrogate_through_the_gateway_is_refused_and_the_thread_goes_on(gateway: Gateway) -> None:
    with gateway.raw("s-gateway") as client:
        answer = _post(client, "/v1/chat/completions", f'{{"model": "m", "messages": [{SURROGATE_TEXT}]}}')
        assert answer.status_code == 400, answer.text  # on main: 500, and every later turn too
    assert gateway.stored("s-gateway") == []


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
@pytest.mark.parametrize(
    "body",
    ["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000,
     '{"model": "m", "messages": [{"role": "user", "content": ' + "[" * 5_000 + "]" * 5_000 + "}]}"],
    ids=["deep-list", "deep-object", "deep-content"],
)
def test_deeply_nested_json_is_a_clean_400(gateway: Gateway, path: str, body: str) -> None:
    with gateway.raw("s-deep") as client:
        answer = _post(client, path, body)
        assert answer.status_code == 400, answer.text[:300]  # on main: 500 (RecursionError)
        assert answer.json()["error"]["type"] == "InvalidInputError"
        assert len(answer.content) < 2_000
