"""obsmem Message <-> Agent Framework Message: property-tested round trips both ways."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Content
from agent_framework import Message as AFMessage
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem import InvalidInputError, Message, ReasoningPart
from obsmem.integrations.agent_framework import from_agent_framework, to_agent_framework
from tests.convert.strategies import conversations, normal_form
from tests.integrations.test_langchain_convert import b64, essence, ids, messages, scalars, texts


@settings(max_examples=200, deadline=None)
@given(st.lists(messages(), max_size=5))
def test_obsmem_to_agent_framework_and_back_is_lossless(original: list[Message]) -> None:
    back = from_agent_framework(to_agent_framework(original))
    assert [essence(m) for m in back] == [essence(m) for m in original]


@settings(max_examples=100, deadline=None)
@given(conversations(pending=True))
def test_whole_conversations_keep_what_the_model_sees(conversation: list[Message]) -> None:
    back = from_agent_framework(to_agent_framework(conversation))
    assert normal_form(back, with_errors=True) == normal_form(conversation, with_errors=True)
    reasoning = [p.text for m in conversation for p in m.parts if isinstance(p, ReasoningPart)]
    assert [p.text for m in back for p in m.parts if isinstance(p, ReasoningPart)] == reasoning


contents = st.one_of(
    texts.map(Content.from_text),
    texts.map(lambda t: Content.from_text_reasoning(text=t)),
    b64.map(lambda d: Content.from_uri(f"data:image/png;base64,{d}", media_type="image/png")),
    st.just(Content.from_uri("https://example.com/a.pdf", media_type="application/pdf", name="a.pdf")),
    st.builds(lambda i, args: Content.from_function_call(f"call_{i}", "search", arguments=args),
              ids, st.dictionaries(st.text(min_size=1, max_size=4), scalars, max_size=2)),
)


def af_essence(message: AFMessage) -> tuple[Any, ...]:
    def content(c: Content) -> tuple[Any, ...]:
        args = c.parse_arguments() if c.type == "function_call" else None
        return c.type, c.text, c.uri, c.media_type, c.name, c.call_id, args, c.result
    return message.role, message.message_id, [content(c) for c in message.contents]


@st.composite
def af_messages(draw: st.DrawFn) -> AFMessage:
    role = draw(st.sampled_from(["user", "assistant", "system", "tool"]))
    if role == "tool":
        body = [Content.from_function_result(draw(ids), result=draw(texts))]
    elif role == "system":
        body = [Content.from_text(draw(texts))]
    else:
        body = draw(st.lists(contents, min_size=1, max_size=4))
        if role == "user":
            body = [c for c in body if c.type != "function_call"] or [Content.from_text("hi")]
        calls = [c for c in body if c.type == "function_call"]
        body = [c for c in body if c.type != "function_call"] + calls  # content before calls
        if len({c.call_id for c in calls}) < len(calls):
            body = [c for c in body if c.type != "function_call"] or [Content.from_text("ok")]
    return AFMessage(role, body, message_id=draw(ids))


@settings(max_examples=200, deadline=None)
@given(st.lists(af_messages(), max_size=5))
def test_agent_framework_to_obsmem_and_back_is_lossless(original: list[AFMessage]) -> None:
    back = to_agent_framework(from_agent_framework(original))
    assert [af_essence(m) for m in back] == [af_essence(m) for m in original]


def test_a_function_result_is_named_by_its_call_and_an_exception_is_an_error() -> None:
    call = AFMessage("assistant", [Content.from_function_call("c1", "get_weather", arguments='{"city": "Oslo"}')])
    result = AFMessage("tool", [Content.from_function_result("c1", result="boom", exception="ValueError")])
    converted = from_agent_framework([call, result])
    assert converted[0].tool_calls[0].args == {"city": "Oslo"}
    part = converted[1].tool_results[0]
    assert (part.tool_name, part.result, part.is_error) == ("get_weather", "boom", True)


def test_a_non_message_is_refused_with_its_index() -> None:
    with pytest.raises(InvalidInputError, match=r"messages\[0\]"):
        from_agent_framework(["hello"])  # type: ignore[list-item]


def test_the_provider_needs_a_memory() -> None:
    from obsmem.integrations.agent_framework import ObservationalMemoryProvider

    with pytest.raises(InvalidInputError, match="memory"):
        ObservationalMemoryProvider("not a memory")  # type: ignore[arg-type]
