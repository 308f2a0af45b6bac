"""Anthropic stop reasons a Chat Completions client must tell apart, through the gateway
(helper-122's hostile review), whole and streamed, with the official ``openai`` client.

Claude ends an answer its safety classifiers cut with ``stop_reason: "refusal"``, and one cut at
the context window with ``"model_context_window_exceeded"``. On main both became
``finish_reason: "stop"``, a normal end: an agent could not tell a refusal or a truncated answer
from a finished one. They now read as Chat Completions says them: ``content_filter`` and ``length``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from obsmem.server import ServerSettings, Service
from tests.models.wire_server import Recorded, Reply, WireServer
from tests.server.live import Keys, LiveServer, live_server, make_keys
from tests.server.test_anthropic_upstream import anthropic_events

STOP: dict[str, str] = {}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Keys]]:
    path: Path = tmp_path_factory.mktemp("stop-reasons")

    def claude(request: Recorded) -> Reply:
        message: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                                   "content": [{"type": "text", "text": "I can"}], "stop_reason": STOP["reason"],
                                   "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
        return Reply(events=anthropic_events(message)) if request.body.get("stream") else Reply(json=message)

    with WireServer() as upstream:
        upstream.responder = claude
        settings = ServerSettings(upstream_url=upstream.url + "/v1", upstream_key="sk-ant", upstream_kind="anthropic")
        service = Service.open(f"sqlite:///{path / 'm.db'}", settings=settings, max_turn_wait=None)
        keys = make_keys(service)
        with live_server(service) as live:
            yield live, keys


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("reason", "finish"), [("refusal", "content_filter"),
                                                ("model_context_window_exceeded", "length")])  # fmt: skip
def test_a_refusal_or_a_cut_is_not_a_normal_stop(
    served: tuple[LiveServer, Keys], reason: str, finish: str, stream: bool
) -> None:
    """On main: finish_reason 'stop' in all four cases."""
    live, keys = served
    STOP["reason"] = reason
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": f"stop-{reason}-{stream}"})  # fmt: skip
    messages: Any = [{"role": "user", "content": "hi"}]
    if stream:
        chunks = [c for c in client.chat.completions.create(model="claude", messages=messages, stream=True)
                  if c.choices]  # fmt: skip
        assert chunks[-1].choices[0].finish_reason == finish
    else:
        answer = client.chat.completions.create(model="claude", messages=messages)
        assert answer.choices[0].finish_reason == finish
