"""Chat Completions through the gateway to an Anthropic upstream (translated both ways), with the
official openai client, streaming and not, tools included."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from obsmem.knowledge import Knowledge
from obsmem.server import ServerSettings, Service
from tests.integrations.agent_model import small_memory_config
from tests.models.wire_server import Recorded, Reply, WireServer, sse
from tests.server.conftest import UPSTREAM_KEY
from tests.server.live import LiveServer, Keys, live_server, make_keys


class Claude:
    """Answers like the Messages API: a tool_use for weather questions, else an echo."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.ids = itertools.count()

    def __call__(self, request: Recorded) -> Reply:
        self.requests.append(request)
        body = request.body
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        result = next((b for b in blocks if b.get("type") == "tool_result"), None)
        text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if result is not None:
            content: list[dict[str, Any]] = [{"type": "text", "text": f"The tool said: {result['content']}"}]
            stop = "end_turn"
        elif "weather" in text and body.get("tools"):
            content = [{"type": "tool_use", "id": f"toolu_{next(self.ids)}", "name": "get_weather",
                        "input": {"city": "Paris"}}]  # fmt: skip
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": f"Claude heard: {text}"}], "end_turn"
        message = {"id": f"msg_{next(self.ids)}", "type": "message", "role": "assistant", "model": body["model"],
                   "content": content, "stop_reason": stop, "usage": {"input_tokens": 11, "output_tokens": 7}}
        return Reply(events=anthropic_events(message)) if body.get("stream") else Reply(json=message)


def anthropic_events(message: dict[str, Any]) -> list[str]:
    """``message`` as the Messages API streams it: text in 4-character deltas, tool input JSON in
    3-character pieces, a thinking block that must not be forwarded, pings in between."""
    events = [sse({"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                         "usage": {"input_tokens": 11, "output_tokens": 0}}},
                  "message_start"), sse({"type": "ping"}, "ping")]  # fmt: skip
    blocks = [{"type": "thinking", "thinking": "secret plan"}, *message["content"]]
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": {"type": "thinking", "thinking": ""}}, "content_block_start"))  # fmt: skip
            events.append(sse({"type": "content_block_delta", "index": index,
                               "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}, "content_block_delta"))  # fmt: skip
        elif block["type"] == "text":
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}}, "content_block_start"))  # fmt: skip
            text = block["text"]
            for start in range(0, len(text), 4):
                events.append(sse({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "text_delta", "text": text[start:start + 4]}}, "content_block_delta"))  # fmt: skip
        else:
            events.append(sse({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}, "content_block_start"))  # fmt: skip
            arguments = json.dumps(block["input"])
            for start in range(0, len(arguments), 3):
                events.append(sse({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": arguments[start:start + 3]}}, "content_block_delta"))  # fmt: skip
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events.append(sse({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]},
                       "usage": {"output_tokens": 7}}, "message_delta"))  # fmt: skip
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Keys, Claude]]:
    path: Path = tmp_path_factory.mktemp("anthropic")
    claude = Claude()
    with WireServer() as upstream:
        upstream.responder = claude
        settings = ServerSettings(upstream_url=upstream.url + "/v1", upstream_key=UPSTREAM_KEY, upstream_kind="anthropic")
        service = Service.open(f"sqlite:///{path / 'm.db'}", settings=settings, knowledge=Knowledge.sqlite(path / "k.db"),
                               config=small_memory_config(), max_turn_wait=None)  # fmt: skip
        keys = make_keys(service)
        with live_server(service) as live:
            yield live, keys, claude


def test_chat_through_an_anthropic_upstream(served: tuple[LiveServer, Keys, Claude]) -> None:
    live, keys, claude = served
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "a-1"})  # fmt: skip
    first = client.chat.completions.create(model="claude-x", messages=[
        {"role": "system", "content": "Be terse."}, {"role": "user", "content": "I am Ana."}])  # fmt: skip
    assert first.choices[0].message.content == "Claude heard: I am Ana."
    assert first.usage is not None and first.usage.total_tokens == 18
    sent = claude.requests[-1]
    assert sent.path.endswith("/v1/messages")
    headers = {k.lower(): v for k, v in sent.headers.items()}
    assert headers["x-api-key"] == UPSTREAM_KEY and "authorization" not in headers
    assert sent.body["system"] == [{"type": "text", "text": "Be terse."}]

    stream = client.chat.completions.create(model="claude-x", stream=True,
                                            messages=[{"role": "user", "content": "Who am I?"}])  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Claude heard: Who am I?"
    roles = [(m["role"], m["content"]) for m in claude.requests[-1].body["messages"]]
    assert roles[0][0] == "user" and "I am Ana." in json.dumps(roles[0][1])
    assert [r for r, _ in roles] == ["user", "assistant", "user"]

    tools: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    call = client.chat.completions.create(model="claude-x", tools=tools,
                                          messages=[{"role": "user", "content": "weather please"}])  # fmt: skip
    assert call.choices[0].finish_reason == "tool_calls"
    tool_call = call.choices[0].message.tool_calls[0]  # type: ignore[index]
    final = client.chat.completions.create(model="claude-x", tools=tools, messages=[
        {"role": "tool", "tool_call_id": tool_call.id, "content": "sunny"}])  # fmt: skip
    assert final.choices[0].message.content == "The tool said: sunny"

    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="claude-x", input="hi")


def test_a_streamed_anthropic_answer_arrives_incrementally_and_is_saved(
    served: tuple[LiveServer, Keys, Claude],
) -> None:
    live, keys, claude = served
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "a-stream"})  # fmt: skip
    chunks = list(client.chat.completions.create(
        model="claude-x", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Tell me about the lighthouse keeper."}]))  # fmt: skip
    assert claude.requests[-1].body["stream"] is True
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) > 5  # one chunk per upstream delta, not the answer in one piece
    assert "".join(texts) == "Claude heard: Tell me about the lighthouse keeper."
    assert "secret plan" not in json.dumps([c.model_dump() for c in chunks])
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 18

    # the streamed answer was saved: the next request's history carries it
    client.chat.completions.create(model="claude-x", messages=[{"role": "user", "content": "thanks"}])
    assert "Claude heard: Tell me about the lighthouse keeper." in json.dumps(claude.requests[-1].body["messages"])

    tools: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    client = client.with_options(default_headers={"X-Obsmem-Thread": "a-stream-tools"})
    streamed = list(client.chat.completions.create(model="claude-x", tools=tools, stream=True,
                                                   messages=[{"role": "user", "content": "weather please"}]))  # fmt: skip
    calls = [call for c in streamed if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert calls[0].function is not None and calls[0].function.name == "get_weather" and calls[0].id
    assert json.loads("".join(call.function.arguments or "" for call in calls if call.function)) == {"city": "Paris"}
    assert [c.choices[0].finish_reason for c in streamed if c.choices][-1] == "tool_calls"

    # the streamed tool call was saved: its result continues the thread
    final = client.chat.completions.create(model="claude-x", tools=tools, messages=[
        {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"}])  # fmt: skip
    assert final.choices[0].message.content == "The tool said: sunny"
    history = json.dumps(claude.requests[-1].body["messages"])
    assert '"get_weather"' in history and "Paris" in history


def test_an_oversized_upstream_answer_is_refused(
    served: tuple[LiveServer, Keys, Claude], monkeypatch: pytest.MonkeyPatch
) -> None:
    from obsmem.server import gateway

    live, keys, claude = served
    monkeypatch.setattr(gateway, "MAX_UPSTREAM_BYTES", 64)
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=keys.alice, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "a-big"})  # fmt: skip
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="claude-x", messages=[{"role": "user", "content": "hello there"}])
    assert raised.value.status_code == 502
    stream = client.chat.completions.create(model="claude-x", stream=True,
                                            messages=[{"role": "user", "content": "hello again"}])  # fmt: skip
    received: list[str] = []
    with pytest.raises(openai.APIError, match="larger than 64 bytes"):  # an error event, never a clean end
        received.extend(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert received == []  # ended before the first event completed
