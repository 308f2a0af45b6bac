"""A thread deleted while the gateway waits on its upstream answer (the user erases the
conversation, another client of the same key deletes it): the answer reaches the client as it
came and nothing of it is saved (delete means gone). On main the save at the end of the answer
raised ``ThreadNotFoundError`` inside the response: a streamed answer was cut off without its
end (``httpx.RemoteProtocolError: incomplete chunked read``, a traceback in the server's log),
and a whole answer was swapped for a 404, the answer the upstream made lost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem import ThreadNotFoundError
from tests.server.live import auth
from tests.server.test_gateway_streams import (
    Answer, Gateway, chunk, claude_end, claude_start, claude_text, open_gateway, sse,
)  # fmt: skip

SAID = "USER-SAID-5521 please answer"
ANSWER = "ANSWER-TEXT-9913"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("deleted-mid-answer"))


@pytest.fixture(scope="module")
def anthropic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("deleted-mid-answer-claude"), upstream_kind="anthropic")


def deleting(gateway: Gateway, thread: str, answer: Answer) -> None:
    """The upstream deletes the thread (over REST, as its owner) before it answers: the input is
    saved, the answer on its way."""

    def respond(path: str, body: Any) -> Answer:
        with httpx.Client(base_url=gateway.live.url, timeout=30) as client:
            deleted = client.delete(f"/api/threads/{thread}", headers=auth(gateway.keys.alice))
        assert deleted.status_code == 200, deleted.text
        return answer

    gateway.upstream.respond = respond


def gone(gateway: Gateway, thread: str) -> None:
    service = gateway.live.service
    gateway.live.call(service.settled())
    with httpx.Client(base_url=gateway.live.url, timeout=30, headers=auth(gateway.keys.alice)) as client:
        assert client.get(f"/api/threads/{thread}").status_code == 404
        assert client.get(f"/api/threads/{thread}/messages").status_code == 404
        exported = client.get("/api/resources/alice/export")
        assert exported.status_code in (200, 404), exported.text
        assert SAID not in exported.text and ANSWER not in exported.text
    with pytest.raises(ThreadNotFoundError):  # the store holds no row of it, the answer included
        gateway.live.call(service.memory.store.list_messages(thread, limit=100))


def stream_lines(gateway: Gateway, thread: str, path: str, body: dict[str, Any]) -> list[str]:
    headers = {**auth(gateway.keys.alice), "X-Obsmem-Thread": thread}
    with httpx.Client(base_url=gateway.live.url, timeout=30, headers=headers) as client:
        with client.stream("POST", path, json={**body, "stream": True}) as response:
            assert response.status_code == 200
            return list(response.iter_lines())  # before: httpx.RemoteProtocolError (the stream cut off)


def test_a_chat_stream_of_a_thread_deleted_meanwhile_ends_whole(gateway: Gateway) -> None:
    deleting(gateway, "dm-chat", Answer([
        chunk({"role": "assistant", "content": ANSWER}), chunk({"content": " more."}, "stop"), sse("[DONE]"),
    ]))  # fmt: skip
    lines = stream_lines(gateway, "dm-chat", "/v1/chat/completions",
                         {"model": "m", "messages": [{"role": "user", "content": SAID}]})  # fmt: skip
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]", lines
    assert any(ANSWER in line for line in lines)
    assert not any('"error"' in line for line in lines)
    gone(gateway, "dm-chat")


def test_a_whole_answer_of_a_thread_deleted_meanwhile_is_answered(gateway: Gateway) -> None:
    completion = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"},
    ]}  # fmt: skip
    deleting(gateway, "dm-whole", Answer([json.dumps(completion).encode()], media="application/json"))
    headers = {**auth(gateway.keys.alice), "X-Obsmem-Thread": "dm-whole"}
    with httpx.Client(base_url=gateway.live.url, timeout=30, headers=headers) as client:
        asked = {"model": "m", "messages": [{"role": "user", "content": SAID}]}
        answer = client.post("/v1/chat/completions", json=asked)
    # before: 404 ThreadNotFoundError, the upstream's answer dropped
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == ANSWER
    gone(gateway, "dm-whole")


def test_a_responses_stream_of_a_thread_deleted_meanwhile_ends_whole(gateway: Gateway) -> None:
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]},
                           ]}  # fmt: skip
    deleting(gateway, "dm-responses", Answer([
        sse({"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
            "response.created"),
        sse({"type": "response.completed", "response": response}, "response.completed"),
    ]))  # fmt: skip
    lines = stream_lines(gateway, "dm-responses", "/v1/responses", {"model": "m", "input": SAID})
    assert any("response.completed" in line for line in lines), lines
    assert not any('"error"' in line for line in lines)
    gone(gateway, "dm-responses")


def test_an_anthropic_stream_of_a_thread_deleted_meanwhile_ends_whole(anthropic: Gateway) -> None:
    pieces = [*claude_start(), *claude_text(0, ANSWER), *claude_end("end_turn")]
    deleting(anthropic, "dm-claude", Answer(pieces))
    lines = stream_lines(anthropic, "dm-claude", "/v1/chat/completions",
                         {"model": "claude", "messages": [{"role": "user", "content": SAID}]})  # fmt: skip
    assert any(ANSWER in line for line in lines) and "data: [DONE]" in lines, lines
    assert not any('"error"' in line for line in lines)
    gone(anthropic, "dm-claude")
