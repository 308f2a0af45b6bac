"""An OpenAI-format REST request (``POST /api/threads/{id}/turns`` or ``/messages`` with
``"format": "openai"``) read the thread's whole history to convert its messages, every time: on a
long thread each turn read every stored message (tens of thousands of rows a request, growing
with the conversation). The history is needed only to name the tool of a ``tool`` message whose
call the request does not hold; then the thread's newest messages are read, the whole thread only
when the call is older than them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.rows_read import RowsRead
from tests.server.conftest import Env, open_env
from tests.server.live import auth

LONG = 1200


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("rest-openai-history"))


def _long_thread(client: httpx.Client, thread: str) -> None:
    assert client.post("/api/threads", json={"id": thread}).status_code == 201
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call-early", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}
    said = client.post(f"/api/threads/{thread}/messages", json={"format": "openai", "messages": [
        {"role": "user", "content": "Look it up."}, call,
        {"role": "tool", "tool_call_id": "call-early", "content": "found"}]})  # fmt: skip
    assert said.status_code == 201, said.text
    for start in range(0, LONG, 400):
        batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about the trip"}
                 for i in range(start, start + 400)]
        assert client.post(f"/api/threads/{thread}/messages", json={"messages": [
            {"role": m["role"], "parts": [{"type": "text", "text": m["content"]}]} for m in batch]}).status_code == 201


def test_an_openai_turn_on_a_long_thread_does_not_read_the_whole_thread(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=120) as client:
        _long_thread(client, "roh-1")
        env.live.call(env.live.service.memory.observe("roh-1"))  # the history observed: the window is short
        # the memory work that observation started (knowledge capture may read the whole thread) done
        env.live.call(env.live.service.memory.settled())
        with RowsRead(env.live.service.memory.store, whole_thread_only=True) as read:
            began = client.post("/api/threads/roh-1/turns", json={
                "format": "openai", "messages": [{"role": "user", "content": "And the hotel?"}]})
            assert began.status_code == 201, began.text
            added = client.post("/api/threads/roh-1/messages", json={
                "format": "openai", "messages": [{"role": "assistant", "content": "Booked."}]})
            assert added.status_code == 201, added.text
        assert read.rows == 0, read.rows


def test_a_tool_result_for_an_old_call_is_still_named(env: Env) -> None:
    """The call it answers is far back (older than the newest messages): found all the same."""
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=120) as client:
        _long_thread(client, "roh-2")
        late = client.post("/api/threads/roh-2/messages", json={
            "format": "openai", "messages": [{"role": "tool", "tool_call_id": "call-early", "content": "late"}]})
        assert late.status_code == 201, late.text
        assert late.json()["messages"][0]["parts"][0]["tool_name"] == "lookup"
