"""A REST recall that fails answers like every other route: the error's status and the API's
error body (``{"error": {"type", "message", "argument"?}}``), never 200 with ``{"error": "<text>"}``
(the recall *tool*'s answer to a model, which a REST client would read as a result)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as http:
        assert http.post("/api/threads", json={"id": "rre-1"}).status_code == 201
        said = http.post("/api/threads/rre-1/messages", json={
            "format": "openai", "messages": [{"role": "user", "content": "My locker is 42."}],
        })  # fmt: skip
        assert said.status_code == 201, said.text
        yield http


def _error(answer: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert set(body) == {"error"} and isinstance(body["error"], dict), body
    assert body["error"]["type"] == kind and body["error"]["message"], body
    return body["error"]


@pytest.mark.parametrize(
    "body",
    [{"cursor": "no-such-message"}, {"group_id": "no-such-group"}, {"target_thread_id": "rre-elsewhere"}],
    ids=["cursor", "group_id", "target_thread_id"],
)
def test_a_recall_of_something_out_of_reach_is_a_404_in_the_error_shape(
    client: httpx.Client, body: dict[str, str]
) -> None:
    """Before: 200 {"error": "..."} (and a target_thread_id was 'an unknown recall argument')."""
    if "target_thread_id" in body:  # a thread of the key's, outside the recall's scope ("thread")
        assert client.post("/api/threads", json={"id": "rre-elsewhere"}).status_code == 201
    _error(client.post("/api/threads/rre-1/recall", json=body), 404, "RecallNotFoundError")


def test_a_recall_search_without_vector_retrieval_is_a_400_in_the_error_shape(client: httpx.Client) -> None:
    _error(client.post("/api/threads/rre-1/recall", json={"mode": "search"}), 400, "InvalidInputError")


def test_a_recall_that_succeeds_still_answers_its_result(client: httpx.Client) -> None:
    answer = client.post("/api/threads/rre-1/recall", json={"mode": "messages", "limit": 5})
    assert answer.status_code == 200, answer.text
    assert "error" not in answer.json() and "My locker is 42." in answer.text
