"""Properties over generated conversations with parallel tool calls.

- every converted conversation satisfies each provider's ordering rules (tests/convert/validators);
- obsmem → provider → obsmem preserves roles, text, attachments, call ids/names/args and results;
- nothing a caller can pass to a ``from_*`` converter escapes as anything but InvalidInputError.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem.convert import (
    from_anthropic,
    from_openai,
    from_openai_responses,
    to_anthropic,
    to_openai,
    to_openai_responses,
)
from obsmem.errors import InvalidInputError
from obsmem.types import DataPart, Message
from tests.convert.strategies import conversations, normal_form
from tests.convert.validators import provider_problems

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(conversations())
def test_every_conversion_satisfies_the_provider_rules(messages: list[Message]) -> None:
    assert provider_problems(messages) == {}


@_SETTINGS
@given(conversations(pending=True))
def test_calls_still_running_at_the_end_are_accepted_only_when_allowed(messages: list[Message]) -> None:
    assert provider_problems(messages, allow_pending_calls=True) == {}
    last_calls = [m for m in messages if m.role == "assistant" and m.tool_calls]
    answered = {r.tool_call_id for m in messages for r in m.tool_results}
    if last_calls and not {c.tool_call_id for c in last_calls[-1].tool_calls} <= answered:
        strict = provider_problems(messages)
        assert set(strict) == {"obsmem", "openai", "openai-responses", "anthropic"}


@_SETTINGS
@given(conversations())
def test_round_trip_through_chat_completions(messages: list[Message]) -> None:
    wire = to_openai(messages)
    assert normal_form(from_openai(wire)) == normal_form(messages)
    assert to_openai(from_openai(wire)) == wire  # a fixed point after one trip


@_SETTINGS
@given(conversations())
def test_round_trip_through_responses(messages: list[Message]) -> None:
    items = to_openai_responses(messages)
    assert normal_form(from_openai_responses(items)) == normal_form(messages)
    assert to_openai_responses(from_openai_responses(items)) == items


@_SETTINGS
@given(conversations())
def test_round_trip_through_anthropic(messages: list[Message]) -> None:
    system, wire = to_anthropic(messages)
    back = from_anthropic(wire, system=system)
    body = [m for m in messages if m.role != "system"]
    assert normal_form(back[len(system) :], with_errors=True) == normal_form(body, with_errors=True)
    assert [m.text for m in back[: len(system)]] == [m.text for m in messages if m.role == "system"]
    assert to_anthropic(back) == (system, wire)


@_SETTINGS
@given(conversations())
def test_data_parts_never_reach_a_provider(messages: list[Message]) -> None:
    names = {p.name for m in messages for p in m.parts if isinstance(p, DataPart)}
    wire = repr([to_openai(messages), to_openai_responses(messages), to_anthropic(messages)])
    assert not any(name in wire for name in names)


# -- arbitrary input: only the typed error ----------------------------------------------------

_KEYS = st.sampled_from(
    [
        "role",
        "content",
        "type",
        "text",
        "tool_calls",
        "id",
        "function",
        "name",
        "arguments",
        "tool_call_id",
        "image_url",
        "url",
        "detail",
        "refusal",
        "reasoning_content",
        "call_id",
        "output",
        "summary",
        "source",
        "media_type",
        "data",
        "input",
        "tool_use_id",
        "is_error",
        "thinking",
        "signature",
        "file",
        "file_data",
        "filename",
        "file_url",
        "input_audio",
        "format",
        "title",
    ]
)
_WORDS = st.sampled_from(
    [
        "user",
        "assistant",
        "system",
        "developer",
        "tool",
        "function",
        "text",
        "image_url",
        "input_audio",
        "file",
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "input_text",
        "output_text",
        "input_image",
        "input_file",
        "refusal",
        "summary_text",
        "tool_use",
        "tool_result",
        "image",
        "document",
        "thinking",
        "redacted_thinking",
        "base64",
        "url",
        "c1",
        "",
        "{}",
        "data:image/png;base64,QUJD",
        "low",
    ]
)
_LEAVES = st.one_of(
    _WORDS, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False), st.text(max_size=5)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=6)),
    max_leaves=25,
)
_ITEMS = st.lists(st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=6), _LEAVES), max_size=4)


def _only_typed_errors(convert: Any, *args: Any, **kwargs: Any) -> None:
    try:
        out = convert(*args, **kwargs)
    except InvalidInputError:
        return
    assert isinstance(out, list) and all(isinstance(m, Message) for m in out)


@settings(max_examples=400, deadline=None)
@given(_ITEMS, _VALUES)
def test_arbitrary_provider_input_raises_only_invalid_input_error(items: list[Any], system: Any) -> None:
    _only_typed_errors(from_openai, items)
    _only_typed_errors(from_openai_responses, items)
    _only_typed_errors(from_anthropic, items, system=system)


@settings(max_examples=100, deadline=None)
@given(_VALUES)
def test_anything_but_a_list_is_refused_with_the_typed_error(value: Any) -> None:
    for convert in (from_openai, from_openai_responses, from_anthropic):
        _only_typed_errors(convert, value)
