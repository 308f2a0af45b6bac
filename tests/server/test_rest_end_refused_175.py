"""A REST turn's ``end`` refused for its body (400) leaves the turn open (helper-175).

The server let go of the turn before ``Turn.end`` checked the messages: a client whose ``end``
was refused (a malformed part, or a tool call sent without its result) and that sent it again,
corrected, got 404 ("it ended, expired or never began") and could not save its answer at all,
although nothing had been saved. A 400 means nothing happened: the corrected ``end`` saves the
answer and ends the turn, and the turn is ended once (a third ``end`` is 404).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("end-refused-175"))


CALL = {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
REFUSED: dict[str, dict[str, Any]] = {
    # a part type obsmem has not got
    "malformed-part": {"format": "obsmem", "messages": [{"role": "assistant", "parts": [{"type": "nope", "x": 1}]}]},
    # the tool call's result left out: an answer between a call and its result
    "call-without-result": {"format": "openai", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "assistant", "content": "It is sunny in Oslo."},
    ]},
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_an_end_refused_for_its_body_can_be_sent_again_corrected(env: Env, case: str) -> None:
    thread = f"end-refused-{case}"
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
        assert client.post("/api/threads", json={"id": thread}).status_code == 201
        begun = client.post(f"/api/threads/{thread}/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        })
        assert begun.status_code == 201, begun.text
        turn_id = begun.json()["turn_id"]

        refused = client.post(f"/api/turns/{turn_id}/end", json=REFUSED[case])
        assert refused.status_code == 400, refused.text
        assert [m["role"] for m in client.get(f"/api/threads/{thread}/messages").json()["messages"]] == ["user"]

        corrected = {"format": "openai", "messages": [
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21C"},
            {"role": "assistant", "content": "It is sunny in Oslo."},
        ]}
        ended = client.post(f"/api/turns/{turn_id}/end", json=corrected)
        # before: 404 TurnNotFoundError, the answer lost
        assert ended.status_code == 200, ended.text
        stored = client.get(f"/api/threads/{thread}/messages").json()["messages"]
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert client.post(f"/api/turns/{turn_id}/end", json=corrected).status_code == 404  # ended once
