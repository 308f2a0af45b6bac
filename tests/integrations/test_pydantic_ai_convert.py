"""obsmem Message ↔ pydantic-ai ModelMessage: property-tested round trips, both ways.

- pydantic-ai → obsmem → pydantic-ai gives the same messages (compared in pydantic-ai's own JSON
  form), for text, user prompts with images/documents/binary content, tool calls (dict, JSON
  string or no args) and tool returns with their ids and outcomes, retry feedback, thinking with signatures,
  response files, timestamps and provider details; only ``metadata["obsmem_ids"]`` is added;
- converting again keeps the obsmem ids, so obsmem → pydantic-ai → obsmem is exact;
- obsmem conversations from anywhere (tests/convert/strategies: parallel calls, results carried
  into user messages, reasoning, attachments, markers) keep what a model sees.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import messages as pai

from obsmem.errors import InvalidInputError
from obsmem.integrations.pydantic_ai import IDS_KEY, from_pydantic_ai, to_pydantic_ai
from obsmem.types import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from tests.convert.strategies import conversations, normal_form

_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
names = st.sampled_from(["get_weather", "search", "calc"])
stamps = st.integers(0, 10**6).map(lambda s: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=s))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)
call_ids = st.text(alphabet="abcdefghij0123456789_", min_size=1, max_size=10)

user_items = st.one_of(
    texts,
    st.sampled_from(["a.png", "b.jpg"]).map(lambda n: pai.ImageUrl(f"https://example.com/{n}")),
    st.just(pai.DocumentUrl("https://example.com/report.pdf")),
    st.binary(min_size=1, max_size=10).map(lambda b: pai.BinaryContent(b, media_type="image/png")),
)
request_parts = st.one_of(
    st.builds(pai.SystemPromptPart, texts, timestamp=stamps),
    st.builds(pai.UserPromptPart, st.one_of(texts, st.lists(user_items, min_size=1, max_size=3)), timestamp=stamps),
    st.builds(
        pai.ToolReturnPart, names, json_values, call_ids, timestamp=stamps,
        outcome=st.sampled_from(["success", "failed", "denied"]),
    ),
    st.builds(
        pai.RetryFeedbackPart,
        st.one_of(texts, st.just([{"type": "missing", "loc": ("city",), "msg": "Field required", "input": {}}])),
        retry=st.builds(pai.RetryInfo, st.sampled_from(["validation_error", "no_output", "model_retry"]),
                        attempt=st.none() | st.integers(1, 3)),
        timestamp=stamps,
    ),
)
response_parts = st.one_of(
    st.builds(pai.TextPart, texts, id=st.none() | st.just("msg_1")),
    st.builds(
        pai.ThinkingPart, texts, signature=st.none() | st.just("sig=="), provider_name=st.none() | st.just("openai")
    ),
    st.builds(
        pai.ToolCallPart, names,
        st.one_of(st.none(), st.dictionaries(st.text(max_size=5), json_values, max_size=3), st.just('{"a": 1}')),
        call_ids,
    ),
    st.binary(min_size=1, max_size=10).map(lambda b: pai.FilePart(pai.BinaryContent(b, media_type="image/png"))),
)
model_messages = st.lists(
    st.one_of(
        st.builds(pai.ModelRequest, st.lists(request_parts, max_size=4), timestamp=st.none() | stamps,
                  run_id=st.none() | st.just("run-1")),
        st.builds(pai.ModelResponse, st.lists(response_parts, max_size=4), timestamp=stamps,
                  model_name=st.none() | st.just("gpt-test"), provider_response_id=st.none() | st.just("r1")),
    ),
    max_size=5,
)


def _dump(messages: list[pai.ModelMessage], *, untag: bool) -> list[dict[str, Any]]:
    dumped: list[dict[str, Any]] = pai.ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    if untag:
        for message in dumped:
            metadata = {k: v for k, v in (message.get("metadata") or {}).items() if k != IDS_KEY}
            message["metadata"] = metadata or None
    return dumped


@_SETTINGS
@given(model_messages)
def test_pydantic_ai_to_obsmem_and_back_is_lossless(messages: list[pai.ModelMessage]) -> None:
    obsmem = from_pydantic_ai(messages)
    back = to_pydantic_ai(obsmem)
    assert _dump(back, untag=True) == _dump(messages, untag=False)
    for message, restored in zip(messages, back, strict=True):
        assert restored.metadata is not None and len(restored.metadata[IDS_KEY]) >= 1


@_SETTINGS
@given(model_messages)
def test_obsmem_to_pydantic_ai_and_back_is_exact(messages: list[pai.ModelMessage]) -> None:
    obsmem = from_pydantic_ai(messages)
    again = from_pydantic_ai(to_pydantic_ai(obsmem))
    assert [m.model_dump() for m in again] == [m.model_dump() for m in obsmem]


@_SETTINGS
@given(conversations())
def test_obsmem_conversations_keep_what_a_model_sees(messages: list[Message]) -> None:
    back = from_pydantic_ai(to_pydantic_ai(messages))
    assert normal_form(back, with_errors=True) == normal_form(messages, with_errors=True)


def test_each_kind_of_content_maps_to_its_obsmem_part() -> None:
    when = datetime(2026, 3, 1, 12, tzinfo=UTC)
    messages: list[pai.ModelMessage] = [
        pai.ModelRequest([
            pai.SystemPromptPart("be brief", timestamp=when),
            pai.UserPromptPart(["look", pai.ImageUrl("https://x.test/a.png"),
                                pai.BinaryContent(b"%PDF", media_type="application/pdf")], timestamp=when),
        ]),
        pai.ModelResponse([
            pai.ThinkingPart("the user wants weather", signature="sig"),
            pai.TextPart("checking"),
            pai.ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="call_7"),
        ], timestamp=when),
        pai.ModelRequest([pai.ToolReturnPart("get_weather", {"sky": "clear"}, tool_call_id="call_7", timestamp=when)]),
    ]
    system, user, assistant, tool = from_pydantic_ai(messages)
    assert (system.role, system.parts) == ("system", (TextPart(text="be brief"),))
    assert user.role == "user" and user.created_at == when
    assert user.parts[0] == TextPart(text="look")
    assert user.parts[1] == FilePart(media_type="image/png", url="https://x.test/a.png")
    assert user.parts[2] == FilePart(media_type="application/pdf", data="JVBERg==")
    assert assistant.parts == (
        ReasoningPart(text="the user wants weather"),
        TextPart(text="checking"),
        ToolCallPart(tool_call_id="call_7", tool_name="get_weather", args={"city": "Paris"}),
    )
    assert tool.role == "tool"
    assert tool.parts == (ToolResultPart(tool_call_id="call_7", tool_name="get_weather", result={"sky": "clear"}),)
    # one pydantic-ai message's obsmem messages share their group; converting again keeps the ids
    assert [m.id for m in from_pydantic_ai(to_pydantic_ai([system, user, assistant, tool]))] == [
        system.id, user.id, assistant.id, tool.id,
    ]


def test_plain_obsmem_messages_become_requests_and_responses() -> None:
    messages = [
        Message.system("be brief"),
        Message.user("hi"),
        Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="calc", args={"x": 1}),)),
        Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="calc", result=2, is_error=True),)),
        Message.assistant("two"),
    ]
    request, call, result, answer = to_pydantic_ai(messages)
    assert isinstance(request, pai.ModelRequest)
    assert [type(p) for p in request.parts] == [pai.SystemPromptPart, pai.UserPromptPart]
    assert isinstance(call, pai.ModelResponse) and call.tool_calls[0].tool_call_id == "c1"
    assert isinstance(result, pai.ModelRequest)
    returned = result.parts[0]
    assert isinstance(returned, pai.ToolReturnPart) and (returned.content, returned.outcome) == (2, "failed")
    assert isinstance(answer, pai.ModelResponse) and answer.text == "two"
    assert request.metadata == {IDS_KEY: [messages[0].id, messages[1].id]}


@pytest.mark.parametrize("bad", ["hello", pai.ModelRequest([pai.UserPromptPart("x")]), [json]])
def test_anything_but_a_list_of_model_messages_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        from_pydantic_ai(bad)
