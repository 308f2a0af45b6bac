"""Prompt caching on the wire: cached input tokens parsed from both providers' usage formats
(streamed and not), Anthropic ``cache_control`` markers and OpenAI's ``prompt_cache_key``."""

from __future__ import annotations

from typing import Any

import pytest
from tests.models.providers.test_anthropic_wire import ev
from tests.models.providers.test_anthropic_wire import message as anthropic_message
from tests.models.providers.test_anthropic_wire import model as anthropic_model
from tests.models.providers.test_openai_wire import chunk, completion
from tests.models.providers.test_openai_wire import model as openai_model
from tests.models.wire_server import Reply, WireServer, sse

from obsmem.models import Endpoint, ModelRequest, OpenAIChatModel, Usage
from obsmem.models.openai import parse_usage
from obsmem.types import Message, TextPart

pytestmark = pytest.mark.anyio

PROMPT = [
    Message.system("You are the observer."),
    Message(role="user", parts=(TextPart(text="## Previous observations\n* old"), TextPart(text="## New\nhi"))),
]
BREAKPOINTS = ((0, 0), (1, 0))
OPENAI_USAGE = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
}
ANTHROPIC_USAGE = {
    "input_tokens": 50,
    "cache_creation_input_tokens": 248,
    "cache_read_input_tokens": 1800,
    "output_tokens": 503,
}


async def test_openai_cached_tokens_non_streamed(server: WireServer) -> None:
    body = completion("ok")
    body["usage"] = OPENAI_USAGE
    server.script(Reply(json=body))
    response = await openai_model(server, stream=False).request(PROMPT)
    assert response.usage == Usage(2006, 300, cached_input_tokens=1920)
    assert response.usage.uncached_input_tokens == 86


async def test_openai_cached_tokens_streamed_from_the_usage_chunk(server: WireServer) -> None:
    events = [chunk({"role": "assistant", "content": "ok"}), chunk({}, "stop")]
    events.append(sse({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": OPENAI_USAGE}))
    events.append(sse("[DONE]"))
    server.script(Reply(events=events))
    response = await openai_model(server).request(PROMPT)
    assert (response.text, response.usage) == ("ok", Usage(2006, 300, cached_input_tokens=1920))


def test_responses_api_usage_shape_is_parsed() -> None:
    raw = {
        "input_tokens": 3000,
        "input_tokens_details": {"cached_tokens": 2048},
        "output_tokens": 120,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 3120,
    }
    assert parse_usage(raw) == Usage(3000, 120, cached_input_tokens=2048)
    # No details (an older or compatible server): nothing cached, nothing invented.
    assert parse_usage({"prompt_tokens": 10, "completion_tokens": 2}) == Usage(10, 2)
    assert parse_usage({"prompt_tokens": 10, "prompt_tokens_details": None}) == Usage(10, 0)
    # A cached count above the input (a confused proxy) is capped at the input.
    assert parse_usage({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 9}}).cached_input_tokens == 5


async def test_openai_sends_a_stable_prompt_cache_key(server: WireServer) -> None:
    server.script(Reply(json=completion("a")), Reply(json=completion("b")), Reply(json=completion("c")))
    model = openai_model(server, stream=False)
    settings = ModelRequest(cache_key="obsmem:observer:thread-1", cache_breakpoints=BREAKPOINTS)
    await model.request(PROMPT, settings)
    await model.request(PROMPT, settings)
    await model.request(PROMPT)
    keys = [r.body.get("prompt_cache_key") for r in server.requests]
    assert keys == ["obsmem:observer:thread-1", "obsmem:observer:thread-1", None]
    # Chat Completions has no markers: the two stable parts reach the wire as one string.
    assert server.requests[0].body["messages"][1]["content"] == "## Previous observations\n* old\n## New\nhi"


async def test_a_compatible_server_gets_no_cache_key_unless_asked(server: WireServer) -> None:
    server.script(Reply(json=completion("a")), Reply(json=completion("b")))
    endpoint = Endpoint("groq", server.url + "/v1", {}, "GROQ_API_KEY")
    settings = ModelRequest(cache_key="k")
    await OpenAIChatModel("llama", endpoint, stream=False).request(PROMPT, settings)
    await OpenAIChatModel("llama", endpoint, stream=False, send_cache_key=True).request(PROMPT, settings)
    assert [r.body.get("prompt_cache_key") for r in server.requests] == [None, "k"]


async def test_anthropic_cache_reads_and_writes_non_streamed(server: WireServer) -> None:
    body: dict[str, Any] = anthropic_message("ok")
    body["usage"] = ANTHROPIC_USAGE
    server.script(Reply(json=body))
    response = await anthropic_model(server, stream=False).request(PROMPT)
    assert response.usage == Usage(2098, 503, cached_input_tokens=1800, cache_write_tokens=248)
    assert response.usage.uncached_input_tokens == 50


async def test_anthropic_cache_reads_and_writes_streamed(server: WireServer) -> None:
    start_usage = {**ANTHROPIC_USAGE, "output_tokens": 1}
    events = [
        ev("message_start", message={"id": "m", "type": "message", "role": "assistant", "content": [],
                                     "model": "claude-sonnet-4-5", "usage": start_usage}),
        ev("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        ev("content_block_delta", index=0, delta={"type": "text_delta", "text": "ok"}),
        ev("content_block_stop", index=0),
        # Newer servers repeat the cumulative input counts here; null leaves a count as it was.
        ev("message_delta", delta={"stop_reason": "end_turn"},
           usage={"output_tokens": 503, "cache_read_input_tokens": 1800, "cache_creation_input_tokens": None}),
        ev("message_stop"),
    ]
    server.script(Reply(events=events))
    response = await anthropic_model(server).request(PROMPT)
    assert response.text == "ok"
    assert response.usage == Usage(2098, 503, cached_input_tokens=1800, cache_write_tokens=248)


async def test_anthropic_request_carries_cache_control_after_the_stable_prefix(server: WireServer) -> None:
    server.script(Reply(json=anthropic_message("ok")))
    await anthropic_model(server, stream=False).request(PROMPT, ModelRequest(cache_breakpoints=BREAKPOINTS))
    body = server.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "You are the observer.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "## Previous observations\n* old",
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "## New\nhi"},
            ],
        }
    ]
    assert "prompt_cache_key" not in body


async def test_anthropic_without_breakpoints_keeps_the_plain_shape_and_caps_markers(server: WireServer) -> None:
    server.script(Reply(json=anthropic_message("a")), Reply(json=anthropic_message("b")))
    await anthropic_model(server, stream=False).request(PROMPT, ModelRequest(cache_key="ignored"))
    parts = tuple(TextPart(text=f"part {i}") for i in range(6))
    many = [Message.system("s"), Message(role="user", parts=parts)]
    marks = ((0, 0), *((1, i) for i in range(6)))
    await anthropic_model(server, stream=False).request(many, ModelRequest(cache_breakpoints=marks))
    plain, capped = (r.body for r in server.requests)
    assert plain["system"] == "You are the observer."
    assert all("cache_control" not in block for m in plain["messages"] for block in m["content"])
    marked = [b for b in capped["messages"][0]["content"] if "cache_control" in b]
    assert len(marked) + 1 == 4  # the system's marker and the first three of the parts
    assert [b["text"] for b in marked] == ["part 0", "part 1", "part 2"]
