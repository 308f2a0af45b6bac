"""An agent model that makes parallel tool calls, built on :class:`tests.integrations.agent_model.AgentModel`.

``weather in <A> and <B>`` calls the weather tool twice in one assistant message (Chat
Completions, not streamed), as models do for independent lookups; everything else, and all the
request validation, is :class:`AgentModel`'s.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from tests.integrations.agent_model import AgentModel, _chat_last
from tests.models.wire_server import Reply

__all__ = ["ParallelAgentModel"]

_TWO_CITIES = re.compile(r"weather in ([A-Z][a-z]+) and ([A-Z][a-z]+)")


class ParallelAgentModel(AgentModel):
    """Two weather calls in one message for ``weather in <A> and <B>``."""

    parallel_calls: int = 0

    def _chat(self, body: dict[str, Any]) -> Reply:
        last = _chat_last(body)
        match = _TWO_CITIES.search(last.text) if last.kind == "user" else None
        if match is None or body.get("stream") or "get_weather" not in last.offered_tools:
            return super()._chat(body)
        with self._lock:
            self.tool_calls += 2
            self.parallel_calls += 1
        calls = [
            {"id": self._next_id("call"), "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}
            for city in match.groups()
        ]
        return Reply(json={
            "id": self._next_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model"), "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                         "message": {"role": "assistant", "content": None, "tool_calls": calls}}],
        })
