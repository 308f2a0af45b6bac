"""An upstream that streams an answer nobody asked to stream (helper-122's hostile review): a
proxy or server that always answers with server-sent events, to a request without ``stream``.

On main the gateway relayed the events as the whole answer: the ``openai`` client (not streaming)
failed reading them (``AttributeError: 'str' object has no attribute 'choices'``) and nothing of
the answer was saved. Now a stream that completed is read into the whole answer the client asked
for (a ``chat.completion``; on the Responses API the terminal event's response) and saved.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.test_gateway_streams import Answer, Gateway, chunk, open_gateway, sse, texts


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("stream-unasked"))


def test_a_chat_answer_streamed_unasked_comes_whole_and_is_saved(gateway: Gateway) -> None:
    """On main: AttributeError in the client, thread [('user', 'hi')]."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":'}}
    gateway.upstream.respond = lambda path, body: Answer([
        chunk({"role": "assistant", "content": "Streamed"}), chunk({"content": " anyway."}),
        chunk({"tool_calls": [call]}), chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]}),
        chunk({}, "tool_calls"), sse("[DONE]"),
    ])  # fmt: skip
    answer = gateway.client("unasked-chat").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    choice = answer.choices[0]
    assert choice.message.content == "Streamed anyway." and choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
        ("call_1", "lookup", '{"q": "x"}')]  # fmt: skip
    saved = gateway.stored("unasked-chat")
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert texts(saved)[1] == ("assistant", "Streamed anyway.")


def test_a_responses_answer_streamed_unasked_comes_whole_and_is_saved(gateway: Gateway) -> None:
    """On main: the client failed reading the events, nothing saved."""
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "created_at": 1,
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "Streamed.", "annotations": []}]}]}  # fmt: skip
    gateway.upstream.respond = lambda path, body: Answer([
        sse({"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
            "response.created"),
        sse({"type": "response.completed", "response": response}, "response.completed"),
    ])  # fmt: skip
    answer = gateway.client("unasked-responses").responses.create(model="m", input="hi")
    assert answer.output_text == "Streamed."
    assert texts(gateway.stored("unasked-responses")) == [("user", "hi"), ("assistant", "Streamed.")]
