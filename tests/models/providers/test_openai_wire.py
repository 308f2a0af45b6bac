"""OpenAI Chat Completions on the wire: request shape, streaming, tool calls and every failure mode."""

from __future__ import annotations

from typing import Any

import pytest
from tests.models.wire_server import Reply, WireServer, sse

from obsmem.clock import FakeClock
from obsmem.errors import IncompleteResponseError, ModelRequestError, ModelUnavailableError
from obsmem.models import Endpoint, ModelRequest, OpenAIChatModel
from obsmem.models.retry import RetryingModel, RetryPolicy, is_transient
from obsmem.types import Message, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

HELLO = [Message.system("be brief"), Message.user("hi")]
NO_JITTER = RetryPolicy(jitter=0.0)


def model(
    server: WireServer, *, stream: bool = True, name: str = "gpt-4o-mini", timeout_s: float = 5.0
) -> OpenAIChatModel:
    endpoint = Endpoint("openai", server.url + "/v1", {"authorization": "Bearer sk-test"}, "OPENAI_API_KEY")
    return OpenAIChatModel(
        name, endpoint, stream=stream, max_tokens_field="max_completion_tokens", timeout_s=timeout_s
    )


def completion(text: str = "hello", finish: str | None = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        **extra,
    }


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, int] | None = None
) -> str:
    choices = (
        []
        if delta is None and finish is None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    )
    body: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return sse(body)


def text_stream(*pieces: str, finish: str | None = "stop", done: bool = True) -> list[str]:
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in pieces]
    if finish is not None:
        events.append(chunk({}, finish))
        events.append(chunk(usage={"prompt_tokens": 20, "completion_tokens": len(pieces)}))
    if done:
        events.append(sse("[DONE]"))
    return events


async def test_plain_request_shape_and_response_mapping(server: WireServer) -> None:
    server.script(Reply(json=completion("hello there")))
    response = await model(server, stream=False).request(
        HELLO, ModelRequest(temperature=0.3, max_output_tokens=99)
    )
    assert (response.text, response.finish_reason, response.model_name) == (
        "hello there",
        "stop",
        "gpt-4o-mini-2024-07-18",
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "temperature": 0.3,
        "max_completion_tokens": 99,
    }


async def test_streamed_text_is_assembled_with_usage_from_the_last_chunk(server: WireServer) -> None:
    server.script(Reply(events=text_stream("Hel", "lo", " world")))
    response = await model(server).request(HELLO)
    assert response.text == "Hello world"
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 3)
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["stream_options"] == {"include_usage": True}


async def test_tool_calls_map_both_ways(server: WireServer) -> None:
    history = [
        Message.user("weather?"),
        Message(
            role="assistant",
            parts=(ToolCallPart(tool_call_id="c1", tool_name="weather", args={"city": "Oslo"}),),
        ),
        Message(
            role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="weather", result={"temp": 3}),)
        ),
    ]
    calls = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "forecast", "arguments": '{"ci'},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Bergen"}'}}]}),
        chunk({}, "tool_calls"),
        sse("[DONE]"),
    ]
    server.script(Reply(events=calls))
    tool = {"name": "forecast", "description": "Forecast for a city", "parameters": {"type": "object"}}
    response = await model(server).request(history, ModelRequest(tools=(tool,)))
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCallPart(tool_call_id="c2", tool_name="forecast", args={"city": "Bergen"}),
    )
    body = server.requests[0].body
    assert body["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
        ],
    }
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3}'}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "forecast",
                "parameters": {"type": "object"},
                "description": "Forecast for a city",
            },
        }
    ]


async def test_reasoning_models_get_no_temperature(server: WireServer) -> None:
    server.script(Reply(json=completion()))
    await model(server, stream=False, name="o3-mini").request(HELLO, ModelRequest(temperature=0.3))
    assert "temperature" not in server.requests[0].body


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_key_is_permanent_and_names_the_variable(server: WireServer, status: int) -> None:
    server.script(
        Reply(
            status=status,
            json={"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
        )
    )
    retrying = RetryingModel(model(server), NO_JITTER, FakeClock())
    with pytest.raises(ModelRequestError) as caught:
        await retrying.request(HELLO)
    assert "OPENAI_API_KEY" in str(caught.value) and "Incorrect API key provided" in str(caught.value)
    assert not is_transient(caught.value)
    assert len(server.requests) == 1


async def test_bad_request_is_permanent_with_the_servers_explanation(server: WireServer) -> None:
    server.script(Reply(status=400, json={"error": {"message": "max_completion_tokens is too large"}}))
    with pytest.raises(ModelRequestError, match="max_completion_tokens is too large") as caught:
        await RetryingModel(model(server), NO_JITTER, FakeClock()).request(HELLO)
    assert caught.value.status_code == 400
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "2500"}, 2.5), ({}, 1.0)],
)
async def test_rate_limit_waits_as_long_as_the_server_asks(
    server: WireServer, headers: dict[str, str], expected: float
) -> None:
    server.script(
        Reply(
            status=429, headers=headers, json={"error": {"message": "Rate limit reached", "type": "requests"}}
        ),
        Reply(events=text_stream("ok")),
    )
    clock = FakeClock()
    response = await RetryingModel(model(server), NO_JITTER, clock).request(HELLO)
    assert response.text == "ok"
    assert clock.sleeps == [expected]


async def test_server_errors_are_retried_until_one_succeeds(server: WireServer) -> None:
    server.script(
        Reply(status=500, json={"error": {"message": "The server had an error"}}),
        Reply(status=503, body=b"<html>upstream down</html>", headers={"content-type": "text/html"}),
        Reply(events=text_stream("fine")),
    )
    clock = FakeClock()
    response = await RetryingModel(model(server), NO_JITTER, clock).request(HELLO)
    assert response.text == "fine"
    assert clock.sleeps == [1.0, 2.0]


async def test_persistent_server_errors_surface_after_the_retries(server: WireServer) -> None:
    server.script(*[Reply(status=502, json={"error": {"message": "bad gateway"}}) for _ in range(3)])
    with pytest.raises(ModelUnavailableError, match="HTTP 502") as caught:
        await RetryingModel(model(server), RetryPolicy(max_retries=2, jitter=0.0), FakeClock()).request(HELLO)
    assert caught.value.status_code == 502
    assert len(server.requests) == 3


async def test_timeout_is_transient_and_retried(server: WireServer) -> None:
    server.script(Reply(delay_s=1.5, json=completion("late")), Reply(json=completion("on time")))
    slow = model(server, stream=False, timeout_s=0.25)
    response = await RetryingModel(slow, NO_JITTER, FakeClock()).request(HELLO)
    assert response.text == "on time"
    server.script(Reply(delay_s=1.5, json=completion("late")))
    with pytest.raises(ModelUnavailableError, match="timed out") as caught:
        await slow.request(HELLO)
    assert is_transient(caught.value)


async def test_stream_cut_mid_way_is_transient_and_retried(server: WireServer) -> None:
    server.script(Reply(events=text_stream("a", "b", "c"), cut_after=2))
    with pytest.raises(ModelUnavailableError) as caught:
        await model(server).request(HELLO)
    assert is_transient(caught.value)
    server.script(Reply(events=text_stream("a", "b"), cut_after=2), Reply(events=text_stream("whole")))
    clock = FakeClock()
    assert (await RetryingModel(model(server), NO_JITTER, clock).request(HELLO)).text == "whole"
    assert clock.sleeps == [1.0]


async def test_stream_that_ends_without_a_finish_reason_is_incomplete(server: WireServer) -> None:
    server.script(Reply(events=text_stream("half a sen", finish=None, done=False)))
    response = await model(server).request(HELLO)
    assert response.finish_reason == "unknown" and response.text == "half a sen"
    server.script(Reply(events=text_stream("half", finish=None)), Reply(events=text_stream("complete")))
    clock = FakeClock()
    assert (await RetryingModel(model(server), NO_JITTER, clock).request(HELLO)).text == "complete"
    assert clock.sleeps == [1.0]


async def test_content_filter_counts_as_incomplete_and_is_retried(server: WireServer) -> None:
    server.script(Reply(json=completion("", finish="content_filter")))
    assert (await model(server, stream=False).request(HELLO)).finish_reason == "content_filter"
    server.script(Reply(json=completion("", finish="content_filter")))
    with pytest.raises(IncompleteResponseError):
        await RetryingModel(model(server, stream=False), RetryPolicy(max_retries=0), FakeClock()).request(
            HELLO
        )
    server.script(Reply(json=completion("", finish="content_filter")), Reply(json=completion("clean")))
    assert (
        await RetryingModel(model(server, stream=False), NO_JITTER, FakeClock()).request(HELLO)
    ).text == "clean"


@pytest.mark.parametrize("stream", [True, False])
async def test_malformed_json_is_transient_and_retried(server: WireServer, stream: bool) -> None:
    bad = (
        Reply(events=[sse('{"choices": [{"delta": {"content": "x"'), sse("[DONE]")])
        if stream
        else Reply(body=b"{not json")
    )
    good = Reply(events=text_stream("parsed")) if stream else Reply(json=completion("parsed"))
    server.script(bad)
    with pytest.raises(ModelUnavailableError, match="not valid JSON") as caught:
        await model(server, stream=stream).request(HELLO)
    assert is_transient(caught.value)
    server.script(bad, good)
    assert (
        await RetryingModel(model(server, stream=stream), NO_JITTER, FakeClock()).request(HELLO)
    ).text == "parsed"


async def test_error_inside_a_stream_uses_its_code(server: WireServer) -> None:
    server.script(
        Reply(
            events=[
                chunk({"content": "par"}),
                sse({"error": {"code": 429, "message": "Provider rate limited"}}),
            ]
        )
    )
    with pytest.raises(ModelUnavailableError, match="Provider rate limited") as caught:
        await model(server).request(HELLO)
    assert caught.value.status_code == 429


async def test_refused_connection_is_transient() -> None:
    endpoint = Endpoint("openai", "http://127.0.0.1:9/v1", {}, "OPENAI_API_KEY")
    with pytest.raises(ModelUnavailableError, match="connection failed") as caught:
        await OpenAIChatModel("m", endpoint, timeout_s=2).request(HELLO)
    assert is_transient(caught.value)


async def test_a_server_that_ignores_stream_true_still_works(server: WireServer) -> None:
    server.script(Reply(json=completion("not streamed")))
    response = await model(server).request(HELLO)
    assert (response.text, response.finish_reason) == ("not streamed", "stop")
    assert server.requests[0].body["stream"] is True
