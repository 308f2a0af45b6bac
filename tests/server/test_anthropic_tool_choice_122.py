"""Chat Completions' ``tool_choice`` and ``parallel_tool_calls`` over an Anthropic upstream
(helper-122's hostile review), with the official ``openai`` client against a live gateway whose
upstream is a real local server recording what it was sent.

An agent that forces a tool call (``tool_choice="required"`` or a named function) or forbids one
(``"none"``), or asks for one call at a time (``parallel_tool_calls=False``), got none of it on
main: the translation to a Messages request dropped both, so Claude chose freely (``auto``) and the
agent's loop got text where it required a call, or a call where it forbade one. They now map to
Anthropic's ``tool_choice`` (``auto``, ``any``, ``tool`` with its name, ``none``;
``disable_parallel_tool_use``).
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

TOOLS: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Keys, list[Recorded]]]:
    path: Path = tmp_path_factory.mktemp("tool-choice")
    sent: list[Recorded] = []

    def claude(request: Recorded) -> Reply:
        sent.append(request)
        return Reply(json={"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                           "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                           "usage": {"input_tokens": 1, "output_tokens": 1}})  # fmt: skip

    with WireServer() as upstream:
        upstream.responder = claude
        settings = ServerSettings(upstream_url=upstream.url + "/v1", upstream_key="sk-ant", upstream_kind="anthropic")
        service = Service.open(f"sqlite:///{path / 'm.db'}", settings=settings, max_turn_wait=None)
        keys = make_keys(service)
        with live_server(service) as live:
            yield live, keys, sent


CASES: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
    ({"tool_choice": "required"}, {"type": "any"}),
    ({"tool_choice": "auto"}, {"type": "auto"}),
    ({"tool_choice": "none"}, {"type": "none"}),
    ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, {"type": "tool", "name": "get_weather"}),
    ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
    ({"tool_choice": "required", "parallel_tool_calls": False}, {"type": "any", "disable_parallel_tool_use": True}),
    ({}, None),
]
IDS = ["required", "auto", "none", "named", "one-at-a-time", "required-one-at-a-time", "unsaid"]


@pytest.mark.parametrize(("options", "expected"), CASES, ids=IDS)
def test_tool_choice_reaches_an_anthropic_upstream(
    served: tuple[LiveServer, Keys, list[Recorded]], options: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    """On main: the Messages request carried no tool_choice at all (all but 'unsaid' failed)."""
    live, keys, sent = served
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "tool-choice"})  # fmt: skip
    client.chat.completions.create(model="claude", tools=TOOLS, messages=[{"role": "user", "content": "weather?"}],
                                   **options)  # fmt: skip
    assert sent[-1].body.get("tool_choice") == expected


def test_a_tool_choice_of_another_shape_is_refused(served: tuple[LiveServer, Keys, list[Recorded]]) -> None:
    """A tool_choice Anthropic has no match for is the client's error (400), not sent on. (On main
    it was dropped and the request answered.)"""
    live, keys, sent = served
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "tool-choice-odd"})  # fmt: skip
    before = len(sent)
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        client.chat.completions.create(model="claude", tools=TOOLS, tool_choice="sometimes",  # type: ignore[arg-type]
                                       messages=[{"role": "user", "content": "weather?"}])  # fmt: skip
    assert len(sent) == before
