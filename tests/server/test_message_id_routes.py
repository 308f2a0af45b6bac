"""A message id holding '/' (a client's own ids: 'chat/42/reply') is taken by the API, so every
route that names a message must reach it: its receipt is read like any other's."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as http:
        yield http


@pytest.mark.parametrize("reply_id", ["chat/42/reply", "ends-with-receipt/receipt", "trailing/"])
def test_the_receipt_of_a_reply_whose_id_holds_a_slash_is_reachable(client: httpx.Client, reply_id: str) -> None:
    thread = f"slash-ids-{abs(hash(reply_id))}"
    assert client.post("/api/threads", json={"id": thread}).status_code == 201
    begun = client.post(f"/api/threads/{thread}/turns", json={
        "messages": [{"id": f"{reply_id}/question", "role": "user", "parts": [{"type": "text", "text": "Hello?"}]}],
    })  # fmt: skip
    assert begun.status_code == 201, begun.text
    ended = client.post(f"/api/turns/{begun.json()['turn_id']}/end", json={
        "messages": [{"id": reply_id, "role": "assistant", "parts": [{"type": "text", "text": "Hi."}]}],
    })  # fmt: skip
    assert ended.status_code == 200, ended.text
    stored = [m["id"] for m in client.get(f"/api/threads/{thread}/messages").json()["messages"]]
    assert stored == [f"{reply_id}/question", reply_id]
    receipt = client.get(f"/api/messages/{reply_id}/receipt")
    assert receipt.status_code == 200, receipt.text
    assert receipt.json()["message_id"] == reply_id and receipt.json()["thread_id"] == thread
    # the user's message has no receipt: the API's own 404, not a missing route
    question = client.get(f"/api/messages/{reply_id}/question/receipt")
    assert question.status_code == 404 and question.json()["error"]["type"] == "NotFoundError", question.text


def test_a_missing_message_is_still_the_api_404(client: httpx.Client) -> None:
    missing = client.get("/api/messages/no/such/message/receipt")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "MessageNotFoundError", missing.text
