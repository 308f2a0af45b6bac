"""The gateway driven by the official ``openai`` client, unmodified, pointed at a live uvicorn
server whose upstream is the local wire-level model server (tests/models/wire_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.models.wire_server import Recorded, Reply, openai_text_stream, sse
from tests.server.conftest import UPSTREAM_KEY, Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("gateway"))


def client_for(env: Env, thread: str | None = None) -> openai.OpenAI:
    headers = {"X-Obsmem-Thread": thread} if thread else {}
    return openai.OpenAI(base_url=env.url + "/v1", api_key=env.keys.alice, default_headers=headers, max_retries=0)


def stored(env: Env, thread: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        messages: list[dict[str, Any]] = client.get(f"/api/threads/{thread}/messages").json()["messages"]
        return messages


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], " ".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")) for m in messages]


def test_chat_non_streaming_keeps_the_thread_in_memory(env: Env) -> None:
    client = client_for(env, "g-chat")
    first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "I live in Porto."}])
    assert first.choices[0].message.content == "You said: I live in Porto."
    # the second request carries only the new message: the gateway adds the history from memory
    second = client.chat.completions.create(
        model="m", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where?"}]
    )
    assert second.choices[0].message.content == "You said: Where?"
    sent = env.upstream.requests[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "Be brief."), ("user", "I live in Porto."), ("assistant", "You said: I live in Porto."),
        ("user", "Where?"),
    ]  # fmt: skip
    assert texts(stored(env, "g-chat")) == [
        ("user", "I live in Porto."), ("assistant", "You said: I live in Porto."),
        ("user", "Where?"), ("assistant", "You said: Where?"),
    ]  # fmt: skip


def test_full_history_resent_is_saved_once(env: Env) -> None:
    client = client_for(env, "g-full")
    history: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "one"}]
    answer = client.chat.completions.create(model="m", messages=history)
    history += [{"role": "assistant", "content": answer.choices[0].message.content}, {"role": "user", "content": "two"}]
    client.chat.completions.create(model="m", messages=history)
    assert texts(stored(env, "g-full")) == [
        ("user", "one"), ("assistant", "You said: one"), ("user", "two"), ("assistant", "You said: two"),
    ]  # fmt: skip


def test_chat_streaming_is_relayed_unchanged_and_saved(env: Env) -> None:
    scripted = openai_text_stream("Streaming works fine today")
    expected = "".join(scripted.events or []).encode()
    model = env.upstream.responder
    env.upstream.responder = lambda request: openai_text_stream("Streaming works fine today")
    try:
        with httpx.Client(base_url=env.url, timeout=60) as raw:
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "stream please"}]}
            with raw.stream("POST", "/v1/chat/completions", json=body,
                            headers={**auth(env.keys.alice), "X-Obsmem-Thread": "g-stream"}) as response:  # fmt: skip
                assert response.status_code == 200
                relayed = b"".join(response.iter_raw())
        assert relayed == expected
        stream = client_for(env, "g-stream").chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "again"}]
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == "Streaming works fine today"
    finally:
        env.upstream.responder = model
    assert texts(stored(env, "g-stream")) == [
        ("user", "stream please"), ("assistant", "Streaming works fine today"),
        ("user", "again"), ("assistant", "Streaming works fine today"),
    ]  # fmt: skip


def test_streamed_tool_calls_round_trip(env: Env) -> None:
    client = client_for(env, "g-tools")
    tools: Any = [{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }}]  # fmt: skip
    stream = client.chat.completions.create(
        model="m", stream=True, tools=tools, messages=[{"role": "user", "content": "What is the weather in Paris?"}]
    )
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] = call.id or slot["id"]
            slot["name"] += (call.function.name or "") if call.function else ""
            slot["arguments"] += (call.function.arguments or "") if call.function else ""
    assert [c["name"] for c in calls.values()] == ["get_weather"]
    call_id = calls[0]["id"]
    # the client sends only the tool result; the call it answers comes from memory
    final = client.chat.completions.create(
        model="m", tools=tools, messages=[{"role": "tool", "tool_call_id": call_id, "content": "sunny, 21C"}]
    )
    assert final.choices[0].message.content == "The tool said: sunny, 21C"
    assert not getattr(env.upstream.responder, "invalid", [])
    roles = [m["role"] for m in stored(env, "g-tools")]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_responses_api_streaming_and_not(env: Env) -> None:
    client = client_for(env, "g-resp")
    response = client.responses.create(model="m", input="Remember my dog is Rex.", instructions="Be kind.")
    assert response.output_text == "You said: Remember my dog is Rex."
    events = list(client.responses.create(model="m", input="And my cat?", stream=True))
    assert events[-1].type == "response.completed"
    assert env.upstream.requests[-2].body["instructions"] == "Be kind."
    sent = env.upstream.requests[-1].body
    assert "previous_response_id" not in sent and "instructions" not in sent
    flat = json.dumps(sent["input"])
    assert "Remember my dog is Rex." in flat and "You said: Remember my dog is Rex." in flat
    assert texts(stored(env, "g-resp")) == [
        ("user", "Remember my dog is Rex."), ("assistant", "You said: Remember my dog is Rex."),
        ("user", "And my cat?"), ("assistant", "You said: And my cat?"),
    ]  # fmt: skip


def test_thread_and_resource_from_metadata_and_user(env: Env) -> None:
    client = client_for(env)
    client.chat.completions.create(
        model="m", user="alice", metadata={"thread_id": "g-meta", "purpose": "test"},
        messages=[{"role": "user", "content": "hi"}],
    )
    sent = env.upstream.requests[-1].body
    assert sent["metadata"] == {"purpose": "test"}
    assert texts(stored(env, "g-meta")) == [("user", "hi"), ("assistant", "You said: hi")]
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "no thread"}])
    assert raised.value.body is not None and "X-Obsmem-Thread" in json.dumps(raised.value.body)


def test_upstream_key_never_leaves_and_client_key_never_goes_upstream(env: Env) -> None:
    seen: list[Recorded] = []
    model = env.upstream.responder
    assert model is not None

    def recording(request: Recorded) -> Reply:
        seen.append(request)
        return model(request)

    env.upstream.responder = recording
    try:
        with httpx.Client(base_url=env.url, timeout=60) as raw:
            for path, body in (
                ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "k"}]}),
                ("/v1/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "k"}]}),
                ("/v1/responses", {"model": "m", "input": "k"}),
            ):
                response = raw.post(path, json=body, headers={**auth(env.keys.alice), "X-Obsmem-Thread": "g-keys"})
                assert response.status_code == 200
                assert UPSTREAM_KEY not in response.text and UPSTREAM_KEY not in str(response.headers)
    finally:
        env.upstream.responder = model
    assert len(seen) == 3
    for request in seen:
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
        assert env.keys.alice not in json.dumps(request.headers) + json.dumps(request.body)


def test_upstream_errors_pass_through_and_the_input_stays_saved(env: Env) -> None:
    model = env.upstream.responder
    env.upstream.responder = lambda request: Reply(status=429, json={"error": {"message": "slow down", "type": "rate"}})
    try:
        with pytest.raises(openai.RateLimitError):
            client_for(env, "g-429").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        env.upstream.responder = model
    assert texts(stored(env, "g-429")) == [("user", "x")]


def test_observations_reach_the_upstream_context(env: Env) -> None:
    client = client_for(env, "g-long")
    for number in range(40):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content":
            f"Fact {number}: the Heron project budget line {number} is {number * 100} euros for the plan."}])  # fmt: skip
    env.live.call(env.live.service.settled())
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Summarise."}])
    sent = env.upstream.requests[-1].body["messages"]
    system = " ".join(m["content"] for m in sent if m["role"] == "system" and isinstance(m["content"], str))
    assert "Heron" in system  # the observations went upstream as obsmem's system message
    assert len(sent) < 80  # and the raw tail is shorter than the 81 messages the thread holds


def test_streaming_events_split_anywhere_are_parsed(env: Env) -> None:
    from obsmem.server.gateway import ChatAnswer, _Sse

    answer = ChatAnswer()
    reader = _Sse(answer.chunk)
    stream = "".join(openai_text_stream("split into bytes").events or []) + sse({"choices": []})
    for index in range(0, len(stream), 7):
        reader.feed(stream[index : index + 7].encode())
    assert [m.text for m in answer.messages([])] == ["split into bytes"]


def test_unreachable_upstream_is_a_502_in_the_error_shape(env: Env) -> None:
    settings = env.live.service.settings
    original = settings.upstream_url
    with httpx.Client() as probe:  # a port nothing listens on: bind, note, close
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        settings.upstream_url = f"http://127.0.0.1:{port}/v1"
        try:
            response = probe.post(env.url + "/v1/chat/completions", timeout=60, json={
                "model": "m", "messages": [{"role": "user", "content": "anyone there?"}]},
                headers={**auth(env.keys.alice), "X-Obsmem-Thread": "g-down"})  # fmt: skip
        finally:
            settings.upstream_url = original
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "UpstreamError" and str(port) not in response.text
    assert texts(stored(env, "g-down")) == [("user", "anyone there?")]


def test_read_only_key_cannot_use_the_gateway(env: Env) -> None:
    client = openai.OpenAI(base_url=env.url + "/v1", api_key=env.keys.alice_read_only, max_retries=0,
                           default_headers={"X-Obsmem-Thread": "g-ro"})  # fmt: skip
    with pytest.raises(openai.PermissionDeniedError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])


def test_another_end_user_naming_a_taken_thread_id_is_refused(env: Env) -> None:
    """An org key serves many end users; the thread id comes from the client. Bob naming the id of
    Alice's thread was put into her thread, and the upstream got her conversation (found by a
    hostile review: "My bank PIN is 4321" sent along with Bob's question)."""
    org = openai.OpenAI(base_url=env.url + "/v1", api_key=env.keys.acme_org,
                        default_headers={"X-Obsmem-Thread": "g-shared"}, max_retries=0)  # fmt: skip
    org.chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "My bank PIN is 4321"}])
    before = len(env.upstream.requests)
    for how in ({"user": "bob"}, {"extra_headers": {"X-Obsmem-Resource": "bob"}}):
        with pytest.raises(openai.APIStatusError) as raised:
            org.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "What do you know about me?"}], **how
            )
        assert raised.value.status_code == 409, raised.value.body
    assert len(env.upstream.requests) == before, "the upstream was called with the other user's thread"
    with httpx.Client(base_url=env.url, headers=auth(env.keys.acme_org), timeout=60) as client:
        messages = client.get("/api/threads/g-shared/messages").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"], "Bob's message went into Alice's thread"
    again = org.chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "and?"}])
    assert again.choices[0].message.content == "You said: and?"


def test_a_streamed_answer_with_several_choices_saves_the_first(env: Env) -> None:
    """``n=2`` streamed: the client gets both choices; what is stored (and what later contexts
    show) was both choices' words interleaved."""

    def two_choices(request: Any) -> Reply:
        def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": index, "delta": delta, "finish_reason": finish}
            return sse({"object": "chat.completion.chunk", "model": "m", "choices": [choice]})

        events = [chunk(i, {"role": "assistant", "content": ""}) for i in (0, 1)]
        for word in ("says:", "hello", "there"):
            events += [chunk(0, {"content": f" {word}"}), chunk(1, {"content": f" {word}"})]
        events = [chunk(0, {"content": "CHOICE0"}), chunk(1, {"content": "CHOICE1"}), *events]
        events += [chunk(0, {}, "stop"), chunk(1, {}, "stop"), "data: [DONE]\n\n"]
        return Reply(events=events)

    model = env.upstream.responder
    env.upstream.responder = two_choices
    try:
        stream = client_for(env, "g-n2").chat.completions.create(
            model="m", n=2, stream=True, messages=[{"role": "user", "content": "hello"}]
        )
        got: dict[int, str] = {}
        for chunk in stream:
            for choice in chunk.choices:
                got[choice.index] = got.get(choice.index, "") + (choice.delta.content or "")
    finally:
        env.upstream.responder = model
    assert got == {0: "CHOICE0 says: hello there", 1: "CHOICE1 says: hello there"}
    assert texts(stored(env, "g-n2")) == [("user", "hello"), ("assistant", "CHOICE0 says: hello there")]


def test_a_history_sent_on_a_new_thread_is_kept(env: Env) -> None:
    """A client moving onto the gateway (or starting a new thread id) with the conversation it
    already has: the gateway saved only the last message and the upstream got nothing else."""
    history: list[Any] = [{"role": "system", "content": "Be brief."}]
    for i in range(5):
        history += [{"role": "user", "content": f"Fact {i}: my locker is number {100 + i}."},
                    {"role": "assistant", "content": f"Noted locker {100 + i}."}]  # fmt: skip
    history.append({"role": "user", "content": "Which lockers did I mention?"})
    client_for(env, "g-moved").chat.completions.create(model="m", messages=history)
    sent = env.upstream.requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [m["content"] for m in history[1:]]
    assert texts(stored(env, "g-moved")) == [
        *((m["role"], m["content"]) for m in history[1:]), ("assistant", "You said: Which lockers did I mention?"),
    ]
    history += [{"role": "assistant", "content": "You said: Which lockers did I mention?"},
                {"role": "user", "content": "Thanks."}]  # fmt: skip
    client_for(env, "g-moved").chat.completions.create(model="m", messages=history)
    assert len(stored(env, "g-moved")) == 14, "the history is saved once, not again on the next request"


def test_a_retried_request_saves_its_input_once(env: Env) -> None:
    """The ``openai`` client retries a failed request as it was (a 429, a dropped connection):
    the input, saved by the failed attempt, was saved again, and every later context showed the
    question twice."""
    model = env.upstream.responder
    env.upstream.responder = lambda request: Reply(status=429, json={"error": {"message": "slow down", "type": "rate"}})
    request: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Book the 9:40 train."}]
    try:
        with pytest.raises(openai.RateLimitError):
            client_for(env, "g-retry").chat.completions.create(model="m", messages=request)
    finally:
        env.upstream.responder = model
    answer = client_for(env, "g-retry").chat.completions.create(model="m", messages=request)
    assert answer.choices[0].message.content == "You said: Book the 9:40 train."
    sent = env.upstream.requests[-1].body["messages"]
    assert [m["content"] for m in sent] == ["sys", "Book the 9:40 train."]
    assert texts(stored(env, "g-retry")) == [("user", "Book the 9:40 train."), ("assistant", "You said: Book the 9:40 train.")]
    client_for(env, "g-retry").chat.completions.create(model="m", messages=[{"role": "user", "content": "Book the 9:40 train."}])
    assert len(stored(env, "g-retry")) == 4, "the same words after an answer are a new message"
