"""An upstream answering a stream request with a 200 JSON *error* body (OpenAI-compatible proxies
and servers that report a failure so: ``{"error": {...}}`` with status 200) reaches the client as
an empty, successful stream (helper-127's hostile review of a1854f1).

a1854f1 turns any 200 JSON body to a stream request into the stream the client asked for:
``_chat_events`` keeps only ``choices`` (none here) and adds ``[DONE]``; the error is dropped, so
an agent reads an empty answer as a finished one. Before a1854f1 the client got an APIError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from tests.server.test_gateway_streams import Answer, Gateway, open_gateway

ERROR = {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("json-error-127"))


def _json(body: object) -> Answer:
    return Answer([json.dumps(body).encode()], media="application/json")


def test_a_json_error_to_a_chat_stream_request_reaches_the_client_as_an_error(gateway: Gateway) -> None:
    gateway.upstream.respond = lambda path, body: _json(ERROR)
    with pytest.raises(openai.APIError):
        stream = gateway.client("json-error-chat").chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
        list(stream)


def test_a_json_error_to_a_responses_stream_request_is_not_a_completed_response(gateway: Gateway) -> None:
    gateway.upstream.respond = lambda path, body: _json(ERROR)
    kinds: list[str] = []
    with pytest.raises(openai.APIError):
        for event in gateway.client("json-error-responses").responses.create(model="m", input="hi", stream=True):
            kinds.append(event.type)
    assert "response.completed" not in kinds
