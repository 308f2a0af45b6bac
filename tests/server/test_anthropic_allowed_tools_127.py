"""OpenAI's ``allowed_tools`` tool_choice (Chat Completions, with GPT-5: ``{"type": "allowed_tools",
"allowed_tools": {"mode": "auto" | "required", "tools": [...]}}``) is refused 400 over an Anthropic
upstream (helper-127's hostile review of 9467bec).

9467bec maps 'auto', 'required', 'none' and a named function to Anthropic's tool_choice and
refuses every other shape; before it, the request was answered (tool_choice dropped). A documented
OpenAI shape with a clear Anthropic match (mode auto -> auto; required -> any; a single allowed
tool -> that tool) now fails the agent's request.
"""

from __future__ import annotations

from typing import Any

import openai

from tests.server.live import Keys, LiveServer
from tests.models.wire_server import Recorded
from tests.server.test_anthropic_tool_choice_122 import TOOLS, served as _served  # noqa: F401

served = _served

ALLOWED: Any = {"type": "allowed_tools",
                "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "get_weather"}}]}}


def test_an_allowed_tools_choice_is_answered(served: tuple[LiveServer, Keys, list[Recorded]]) -> None:  # noqa: F811
    live, keys, sent = served
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "allowed-tools-127"})  # fmt: skip
    answer = client.chat.completions.create(model="claude", tools=TOOLS, tool_choice=ALLOWED,
                                            messages=[{"role": "user", "content": "weather?"}])  # fmt: skip
    assert answer.choices[0].message.content == "ok"
    assert sent[-1].body.get("tool_choice", {}).get("type") in ("auto", None)
