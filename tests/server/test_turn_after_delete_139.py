"""A REST turn begun before its thread was deleted does not outlive the delete: the server held
the turn (its context, the deleted messages' text in it), and once the thread was made again
under the same id, ``POST /api/turns/{id}/step`` answered that context (the deleted message's
text) and ``step``/``end`` saved into the new thread as the old turn. Now a turn whose thread is
no longer the one it began on is not found (404, the turn gone) like any ended turn."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

SECRET = "DELETED-PIN-6042"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("turn-after-delete-139"))


@pytest.mark.parametrize("route", ["step", "end"])
def test_a_turn_begun_before_a_delete_answers_nothing_of_the_deleted_thread(env: Env, route: str) -> None:
    thread = f"tad-{route}"
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60, headers=alice) as client:
        assert client.post("/api/threads", json={"id": thread}).status_code == 201
        said = {"format": "openai", "messages": [{"role": "user", "content": f"My PIN is {SECRET}."}]}
        begun = client.post(f"/api/threads/{thread}/turns", json=said)
        assert begun.status_code == 201, begun.text
        turn_id = begun.json()["turn_id"]
        assert client.delete(f"/api/threads/{thread}").json() == {"deleted": True}
        assert client.post("/api/threads", json={"id": thread}).status_code == 201  # the id again
        reply = {"format": "openai", "messages": [{"role": "assistant", "content": "Noted."}]}
        answer = client.post(f"/api/turns/{turn_id}/{route}", json=reply)
        # before: 200, and for step the context held the deleted message ('My PIN is DELETED-PIN-6042.')
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["type"] == "TurnNotFoundError"
        assert SECRET not in answer.text
        # the turn is gone: a second call is refused too, and the new thread holds nothing of it
        assert client.post(f"/api/turns/{turn_id}/step", json=reply).status_code == 404
        assert client.get(f"/api/threads/{thread}/messages").json()["messages"] == []
        assert SECRET not in client.get(f"/api/threads/{thread}/context").text
