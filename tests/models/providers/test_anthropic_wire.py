"""Anthropic Messages API on the wire: request shape, typed stream events, tool use and failures."""

from __future__ import annotations

from typing import Any

import pytest
from tests.models.wire_server import Reply, WireServer, sse

from obsmem.clock import FakeClock
from obsmem.errors import IncompleteResponseError, ModelRequestError, ModelUnavailableError
from obsmem.models import AnthropicModel, Endpoint, ModelRequest
from obsmem.models.anthropic import ANTHROPIC_VERSION, default_max_tokens
from obsmem.models.retry import RetryingModel, RetryPolicy, is_transient
from obsmem.types import Message, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

HELLO = [Message.system("be brief"), Message.user("hi")]
NO_JITTER = RetryPolicy(jitter=0.0)


def model(
    server: WireServer, *, stream: bool = True, timeout_s: float = 5.0, name: str = "claude-sonnet-4-5"
) -> AnthropicModel:
    headers = {"x-api-key": "sk-ant-test", "anthropic-version": ANTHROPIC_VERSION}
    endpoint = Endpoint("anthropic", server.url, headers, "ANTHROPIC_API_KEY")
    return AnthropicModel(name, endpoint, stream=stream, timeout_s=timeout_s)


def message(text: str = "hello", stop: str | None = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 4, "cache_read_input_tokens": 5},
    }


def ev(kind: str, **data: Any) -> str:
    return sse({"type": kind, **data}, event=kind)


def text_stream(*pieces: str, stop: str | None = "end_turn", finished: bool = True) -> list[str]:
    events = [
        ev(
            "message_start",
            message={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 25, "output_tokens": 1},
            },
        ),
        ev("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        sse({"type": "ping"}, event="ping"),
    ]
    events += [ev("content_block_delta", index=0, delta={"type": "text_delta", "text": p}) for p in pieces]
    events.append(ev("content_block_stop", index=0))
    if stop is not None:
        events.append(
            ev(
                "message_delta",
                delta={"stop_reason": stop, "stop_sequence": None},
                usage={"output_tokens": 9},
            )
        )
    if finished:
        events.append(ev("message_stop"))
    return events


async def test_plain_request_shape_and_response_mapping(server: WireServer) -> None:
    server.script(Reply(json=message("hello there")))
    response = await model(server, stream=False).request(
        HELLO, ModelRequest(temperature=1.7, max_output_tokens=500)
    )
    assert (response.text, response.finish_reason) == ("hello there", "stop")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (
        16,
        4,
    )  # cache reads count as input
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert sent.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 500,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "temperature": 1.0,  # the Messages API allows 0-1
    }


async def test_max_tokens_is_always_sent() -> None:
    assert default_max_tokens("claude-3-haiku-20240307") == 4_096
    assert default_max_tokens("claude-3-5-haiku-latest") == 8_192
    assert default_max_tokens("claude-sonnet-4-5") == 32_000


async def test_streamed_text_and_usage(server: WireServer) -> None:
    server.script(Reply(events=text_stream("Hel", "lo")))
    response = await model(server).request(HELLO)
    assert (response.text, response.finish_reason) == ("Hello", "stop")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (25, 9)
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["max_tokens"] == 32_000


async def test_tool_use_maps_both_ways(server: WireServer) -> None:
    history = [
        Message.user("weather?"),
        Message(
            role="assistant",
            parts=(ToolCallPart(tool_call_id="t1", tool_name="weather", args={"city": "Oslo"}),),
        ),
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id="t1", tool_name="weather", result="3 C", is_error=False),),
        ),
        Message.user("and tomorrow?"),
    ]
    events = [
        ev("message_start", message={"model": "claude", "usage": {"input_tokens": 40, "output_tokens": 1}}),
        ev("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        ev("content_block_delta", index=0, delta={"type": "text_delta", "text": "Checking."}),
        ev("content_block_stop", index=0),
        ev(
            "content_block_start",
            index=1,
            content_block={"type": "tool_use", "id": "t2", "name": "forecast", "input": {}},
        ),
        ev("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": '{"city": '}),
        ev(
            "content_block_delta",
            index=1,
            delta={"type": "input_json_delta", "partial_json": '"Oslo", "days": 1}'},
        ),
        ev("content_block_stop", index=1),
        ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 30}),
        ev("message_stop"),
    ]
    server.script(Reply(events=events))
    tool = {"name": "forecast", "description": "Forecast", "parameters": {"type": "object"}}
    response = await model(server).request(history, ModelRequest(tools=(tool,)))
    assert response.text == "Checking."
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCallPart(tool_call_id="t2", tool_name="forecast", args={"city": "Oslo", "days": 1}),
    )
    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}],
        },
        # the tool result and the next user message share one user turn: roles must alternate
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "3 C"},
                {"type": "text", "text": "and tomorrow?"},
            ],
        },
    ]
    assert body["tools"] == [
        {"name": "forecast", "input_schema": {"type": "object"}, "description": "Forecast"}
    ]


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_key_names_the_variable_and_is_not_retried(server: WireServer, status: int) -> None:
    server.script(
        Reply(
            status=status,
            json={"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        )
    )
    with pytest.raises(ModelRequestError, match="ANTHROPIC_API_KEY") as caught:
        await RetryingModel(model(server), NO_JITTER, FakeClock()).request(HELLO)
    assert "invalid x-api-key" in str(caught.value)
    assert len(server.requests) == 1


async def test_rate_limit_and_overload_are_retried_honouring_retry_after(server: WireServer) -> None:
    server.script(
        Reply(
            status=429,
            headers={"retry-after": "12"},
            json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        ),
        Reply(
            status=529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ),
        Reply(status=500, json={"type": "error", "error": {"type": "api_error", "message": "Internal"}}),
        Reply(events=text_stream("ok")),
    )
    clock = FakeClock()
    assert (await RetryingModel(model(server), NO_JITTER, clock).request(HELLO)).text == "ok"
    assert clock.sleeps == [12.0, 2.0, 4.0]


async def test_timeout_is_transient_and_retried(server: WireServer) -> None:
    server.script(Reply(delay_s=1.5, json=message("late")), Reply(json=message("on time")))
    slow = model(server, stream=False, timeout_s=0.25)
    assert (await RetryingModel(slow, NO_JITTER, FakeClock()).request(HELLO)).text == "on time"


async def test_stream_cut_mid_way_is_retried(server: WireServer) -> None:
    server.script(Reply(events=text_stream("a", "b", "c"), cut_after=4))
    with pytest.raises(ModelUnavailableError) as caught:
        await model(server).request(HELLO)
    assert is_transient(caught.value)
    server.script(Reply(events=text_stream("a"), cut_after=4), Reply(events=text_stream("whole")))
    clock = FakeClock()
    assert (await RetryingModel(model(server), NO_JITTER, clock).request(HELLO)).text == "whole"
    assert clock.sleeps == [1.0]


async def test_stream_without_message_stop_is_incomplete(server: WireServer) -> None:
    server.script(Reply(events=text_stream("half", stop=None, finished=False)))
    assert (await model(server).request(HELLO)).finish_reason == "unknown"
    server.script(
        Reply(events=text_stream("half", stop=None, finished=False)), Reply(events=text_stream("done"))
    )
    assert (await RetryingModel(model(server), NO_JITTER, FakeClock()).request(HELLO)).text == "done"


@pytest.mark.parametrize(("stop", "finish"), [("refusal", "content_filter"), ("pause_turn", "other")])
async def test_unusual_stop_reasons_are_retried_as_incomplete(
    server: WireServer, stop: str, finish: str
) -> None:
    server.script(Reply(json=message("", stop=stop)))
    assert (await model(server, stream=False).request(HELLO)).finish_reason == finish
    server.script(Reply(json=message("", stop=stop)))
    with pytest.raises(IncompleteResponseError):
        await RetryingModel(model(server, stream=False), RetryPolicy(max_retries=0), FakeClock()).request(
            HELLO
        )


async def test_error_event_mid_stream_is_transient_when_overloaded(server: WireServer) -> None:
    events = text_stream("partial", stop=None, finished=False)
    events.append(ev("error", error={"type": "overloaded_error", "message": "Overloaded"}))
    server.script(Reply(events=events))
    with pytest.raises(ModelUnavailableError, match="Overloaded") as caught:
        await model(server).request(HELLO)
    assert caught.value.status_code == 529


@pytest.mark.parametrize("stream", [True, False])
async def test_malformed_json_is_transient_and_retried(server: WireServer, stream: bool) -> None:
    bad = (
        Reply(events=[ev("message_start", message={}), sse("{broken", event="content_block_delta")])
        if stream
        else Reply(body=b"<html>")
    )
    good = Reply(events=text_stream("parsed")) if stream else Reply(json=message("parsed"))
    server.script(bad)
    with pytest.raises(ModelUnavailableError, match="not valid JSON"):
        await model(server, stream=stream).request(HELLO)
    server.script(bad, good)
    assert (
        await RetryingModel(model(server, stream=stream), NO_JITTER, FakeClock()).request(HELLO)
    ).text == "parsed"


async def test_a_server_that_ignores_stream_true_still_works(server: WireServer) -> None:
    server.script(Reply(json=message("not streamed")))
    response = await model(server).request(HELLO)
    assert (response.text, response.finish_reason) == ("not streamed", "stop")
