"""A gateway thread deleted while its upstream answer is on its way, and made again under the same
id by another org before the answer ends, is another tenant's thread: the answer is not saved
into it (helper-142).

950c529 made the gateway keep nothing of an answer whose thread was deleted meanwhile
(``ThreadNotFoundError`` at the turn's end). But the turn's end saves by thread id: when another
org (globex) took the freed id in the meantime (gateway ids are client-named: 'user/1/chat'),
alice's upstream answer was saved into globex's thread, under globex's resource, and globex read
it with its own key (``GET /api/threads/{id}/messages``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.live import auth
from tests.server.test_gateway_streams import Answer, Gateway, chunk, open_gateway, sse

SAID = "ALICE-SAID-6612 please answer"
ANSWER = "ALICE-ANSWER-4471"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("recreated-mid-answer"))


def taken_over(gateway: Gateway, thread: str, answer: Answer) -> None:
    """Before the upstream answers, alice deletes the thread and globex makes one under its id."""

    def respond(path: str, body: Any) -> Answer:
        with httpx.Client(base_url=gateway.live.url, timeout=30) as client:
            deleted = client.delete(f"/api/threads/{thread}", headers=auth(gateway.keys.alice))
            assert deleted.status_code == 200, deleted.text
            made = client.post("/api/threads", headers=auth(gateway.keys.globex),
                               json={"id": thread, "resource_id": "carol"})  # fmt: skip
            assert made.status_code == 201, made.text
        return answer

    gateway.upstream.respond = respond


def globex_reads(gateway: Gateway, thread: str) -> str:
    gateway.live.call(gateway.live.service.settled())
    with httpx.Client(base_url=gateway.live.url, timeout=30, headers=auth(gateway.keys.globex)) as client:
        read = client.get(f"/api/threads/{thread}/messages")
        assert read.status_code == 200, read.text
        exported = client.get("/api/resources/carol/export")
        return read.text + exported.text


def test_a_streamed_answer_is_not_saved_into_another_orgs_thread(gateway: Gateway) -> None:
    taken_over(gateway, "rc-stream", Answer([
        chunk({"role": "assistant", "content": ANSWER}), chunk({"content": " more."}, "stop"), sse("[DONE]"),
    ]))  # fmt: skip
    headers = {**auth(gateway.keys.alice), "X-Obsmem-Thread": "rc-stream"}
    with httpx.Client(base_url=gateway.live.url, timeout=30, headers=headers) as client:
        asked = {"model": "m", "stream": True, "messages": [{"role": "user", "content": SAID}]}
        with client.stream("POST", "/v1/chat/completions", json=asked) as response:
            assert response.status_code == 200
            lines = list(response.iter_lines())
    assert any(ANSWER in line for line in lines)  # alice still gets her answer
    assert ANSWER not in globex_reads(gateway, "rc-stream")  # before: in globex's thread, resource carol


def test_a_whole_answer_is_not_saved_into_another_orgs_thread(gateway: Gateway) -> None:
    completion = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"},
    ]}  # fmt: skip
    taken_over(gateway, "rc-whole", Answer([json.dumps(completion).encode()], media="application/json"))
    headers = {**auth(gateway.keys.alice), "X-Obsmem-Thread": "rc-whole"}
    with httpx.Client(base_url=gateway.live.url, timeout=30, headers=headers) as client:
        asked = {"model": "m", "messages": [{"role": "user", "content": SAID}]}
        answer = client.post("/v1/chat/completions", json=asked)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == ANSWER
    assert ANSWER not in globex_reads(gateway, "rc-whole")  # before: in globex's thread, resource carol
