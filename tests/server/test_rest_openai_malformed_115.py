"""A malformed OpenAI-format tool message sent to the REST API (a ``tool_call_id`` that is not a
string: a list or an object) is the client's error, a 400 InvalidInputError naming the field, as it was before the
bounded history read (fc34b97): that read put the ids into a set first and the server answered
500 (TypeError: unhashable type)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("rest-openai-malformed-115"))


@pytest.mark.parametrize("route", ["messages", "turns"])
@pytest.mark.parametrize("bad", [["call-1"], {"id": "call-1"}], ids=["list", "object"])
def test_an_unhashable_tool_call_id_is_a_client_error(env: Env, route: str, bad: object) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        thread = f"rom-{route}-{type(bad).__name__}"
        assert client.post("/api/threads", json={"id": thread}).status_code == 201
        sent = client.post(f"/api/threads/{thread}/{route}", json={"format": "openai", "messages": [
            {"role": "tool", "tool_call_id": bad, "content": "found"}]})
        assert sent.status_code == 400, (sent.status_code, sent.text)
        assert sent.json()["error"]["type"] == "InvalidInputError"


@pytest.mark.parametrize("bad", [["call-1"], {"id": "call-1"}], ids=["list", "object"])
def test_an_unhashable_call_id_on_an_assistant_message_is_a_client_error(env: Env, bad: object) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        thread = f"rom-call-{type(bad).__name__}"
        assert client.post("/api/threads", json={"id": thread}).status_code == 201
        sent = client.post(f"/api/threads/{thread}/messages", json={"format": "openai", "messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": bad, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call-1", "content": "found"}]})
        assert sent.status_code == 400, (sent.status_code, sent.text)
        assert sent.json()["error"]["type"] == "InvalidInputError"
