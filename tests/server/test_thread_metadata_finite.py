"""NaN and Infinity in a new thread's metadata (Python's JSON reader takes them, though they are
not JSON) are refused with a 400 InvalidInputError naming ``metadata``, and no thread is made:
they were stored as null, the client's data silently changed."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    headers = {**auth(env.keys.alice), "Content-Type": "application/json"}
    with httpx.Client(base_url=env.url, headers=headers, timeout=60) as http:
        yield http


@pytest.mark.parametrize(
    ("thread_id", "metadata"),
    [("nan-1", '{"score": NaN}'), ("nan-2", '{"limit": Infinity}'), ("nan-3", '{"floor": -Infinity}'),
     ("nan-4", '{"scores": [1.5, {"x": NaN}]}')],
)  # fmt: skip
def test_a_non_finite_number_in_thread_metadata_is_a_400_naming_metadata(
    client: httpx.Client, thread_id: str, metadata: str
) -> None:
    made = client.post("/api/threads", content=f'{{"id": "{thread_id}", "metadata": {metadata}}}')
    assert made.status_code == 400, made.text
    error = made.json()["error"]
    assert error["type"] == "InvalidInputError" and error["argument"] == "metadata", error
    assert client.get(f"/api/threads/{thread_id}").status_code == 404


def test_finite_numbers_in_thread_metadata_are_kept(client: httpx.Client) -> None:
    body = '{"id": "finite-1", "metadata": {"big": 1e308, "small": -0.5}}'
    made = client.post("/api/threads", content=body)
    assert made.status_code == 201, made.text
    assert client.get("/api/threads/finite-1").json()["metadata"] == {"big": 1e308, "small": -0.5}


@pytest.mark.parametrize(
    ("thread_id", "message", "argument"),
    [("msg-nan-1", '{"role": "user", "parts": [{"type": "text", "text": "a"}], "metadata": {"score": NaN}}',
      "messages[0].metadata"),
     ("msg-nan-2", '{"role": "user", "parts": [{"type": "data", "name": "app-x", "data": {"n": [Infinity]}}]}',
      "messages[0].parts[0].data")],
)  # fmt: skip
def test_a_non_finite_number_in_a_saved_message_is_a_400_naming_the_field(
    client: httpx.Client, thread_id: str, message: str, argument: str
) -> None:
    assert client.post("/api/threads", json={"id": thread_id}).status_code == 201
    saved = client.post(f"/api/threads/{thread_id}/messages", content=f'{{"messages": [{message}]}}')
    assert saved.status_code == 400, saved.text
    error = saved.json()["error"]
    assert error["type"] == "InvalidInputError" and error["argument"] == argument, error
    assert client.get(f"/api/threads/{thread_id}/messages").json()["messages"] == []
