"""obsmem Message <-> LangChain BaseMessage: property-tested round trips both ways."""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from obsmem import FilePart, InvalidInputError, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from obsmem.integrations.langchain import from_langchain, to_langchain
from tests.convert.strategies import conversations, normal_form

texts = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20)
ids = st.text(alphabet="abcdefghijklmnop0123456789-_", min_size=1, max_size=12)
scalars = st.one_of(st.integers(-99, 99), st.text(max_size=6), st.booleans(), st.none())
json_values = st.one_of(
    st.text(max_size=20), st.integers(), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=5), scalars, max_size=3),
)
b64 = st.binary(min_size=1, max_size=9).map(lambda b: base64.b64encode(b).decode())
files = st.builds(
    lambda mime, url, data, uri, name, size, detail: FilePart(
        media_type=mime,
        url=url,
        data=(f"data:{mime};base64,{data}" if uri else data) if data or not url else "AAAA",
        filename=name, width=size, height=size, detail=detail,
    ),
    st.sampled_from(["image/png", "image/jpeg", "application/pdf", "audio/wav"]),
    st.one_of(st.none(), st.sampled_from(["https://example.com/a.png", "https://example.com/doc.pdf"])),
    st.one_of(st.none(), b64),
    st.booleans(),
    st.one_of(st.none(), st.sampled_from(["a.png", "report.pdf"])),
    st.one_of(st.none(), st.integers(1, 4096)),
    st.one_of(st.none(), st.sampled_from(["low", "high", "auto"])),
)
calls = st.builds(
    lambda i, name, args: ToolCallPart(tool_call_id=f"call_{i}", tool_name=name, args=args),
    ids, st.sampled_from(["search", "get_weather"]),
    st.one_of(st.dictionaries(st.text(min_size=1, max_size=5), scalars, max_size=3), texts),
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """A message in the form the converters keep exactly (one result per tool message, content
    before calls)."""
    role = draw(st.sampled_from(["user", "assistant", "system", "tool"]))
    message_id = draw(ids)
    if role == "tool":
        result = ToolResultPart(
            tool_call_id=draw(ids), tool_name=draw(st.sampled_from(["search", "calc"])),
            result=draw(json_values), is_error=draw(st.booleans()),
        )
        return Message(id=message_id, role="tool", parts=(result,))
    if role == "system":
        return Message(id=message_id, role="system", parts=tuple(TextPart(text=t) for t in draw(st.lists(texts, min_size=1, max_size=2))))
    body = draw(st.lists(st.one_of(texts.map(lambda t: TextPart(text=t)), files), max_size=3))
    if role == "user":
        return Message(id=message_id, role="user", parts=tuple(body) or (TextPart(text="hi"),))
    head = [ReasoningPart(text=draw(texts))] if draw(st.booleans()) else []
    tail = draw(st.lists(calls, max_size=3, unique_by=lambda c: c.tool_call_id))
    parts = (*head, *body, *tail) or (TextPart(text="ok"),)
    return Message(id=message_id, role="assistant", parts=parts)


def essence(message: Message) -> tuple[Any, ...]:
    return message.id, message.role, message.parts


@settings(max_examples=200, deadline=None)
@given(st.lists(messages(), max_size=5))
def test_obsmem_to_langchain_and_back_is_lossless(original: list[Message]) -> None:
    back = from_langchain(to_langchain(original))
    assert [essence(m) for m in back] == [essence(m) for m in original]


@settings(max_examples=100, deadline=None)
@given(conversations(pending=True))
def test_whole_conversations_keep_what_the_model_sees(conversation: list[Message]) -> None:
    """Results carried in user messages, several results per tool message, markers: the text,
    attachments, calls and results (ids, names, errors) come back in the order a model sees them."""
    back = from_langchain(to_langchain(conversation))
    assert normal_form(back, with_errors=True) == normal_form(conversation, with_errors=True)
    reasoning = [p.text for m in conversation for p in m.parts if isinstance(p, ReasoningPart)]
    assert [p.text for m in back for p in m.parts if isinstance(p, ReasoningPart)] == reasoning


lc_blocks = st.one_of(
    texts.map(lambda t: {"type": "text", "text": t}),
    texts.map(lambda t: {"type": "text", "text": t, "annotations": [{"type": "citation", "url": "https://x"}], "id": "t1"}),
    texts.map(lambda t: {"type": "reasoning", "reasoning": t}),
    texts.map(lambda t: {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": t}]}),
    texts.map(lambda t: {"type": "thinking", "thinking": t, "signature": "sig-" + t[:3]}),
    b64.map(lambda d: {"type": "image", "base64": d, "mime_type": "image/png"}),
    st.just({"type": "image", "url": "https://example.com/x.png", "mime_type": "image/png", "extras": {"detail": "low"}}),
    st.just({"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf", "extras": {"filename": "a.pdf"}}),
    st.just({"type": "non_standard", "value": {"anything": [1, 2]}}),
)


@st.composite
def lc_messages(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "system", "tool"]))
    message_id = draw(ids)
    content: Any = draw(st.one_of(texts, st.lists(lc_blocks, min_size=2, max_size=4)))
    if kind == "human":
        return HumanMessage(content=content, id=message_id)
    if kind == "system":
        return SystemMessage(content=draw(texts), id=message_id)
    if kind == "tool":
        return ToolMessage(
            content=draw(texts), tool_call_id=draw(ids), name=draw(st.sampled_from(["search", "calc"])),
            status=draw(st.sampled_from(["success", "error"])), id=message_id,
        )
    tool_calls = [
        {"type": "tool_call", "id": f"call_{i}", "name": "search", "args": draw(st.dictionaries(st.text(min_size=1, max_size=4), scalars, max_size=2))}
        for i in draw(st.lists(ids, max_size=2, unique=True))
    ]
    return AIMessage(content=content, tool_calls=tool_calls, id=message_id)


def lc_essence(message: BaseMessage) -> tuple[Any, ...]:
    extra: tuple[Any, ...] = ()
    if isinstance(message, AIMessage):
        extra = (message.tool_calls, message.invalid_tool_calls)
    if isinstance(message, ToolMessage):
        extra = (message.tool_call_id, message.name, message.status)
    return type(message), message.id, message.content, extra


@settings(max_examples=200, deadline=None)
@given(st.lists(lc_messages(), max_size=5))
def test_langchain_to_obsmem_and_back_is_lossless(original: list[BaseMessage]) -> None:
    """Provider blocks (reasoning ids and signatures, annotations, unknown blocks) come back as they were."""
    back = to_langchain(from_langchain(original))
    assert [lc_essence(m) for m in back] == [lc_essence(m) for m in original]


def test_a_tool_message_without_a_name_is_named_by_its_call() -> None:
    call = AIMessage(content="", tool_calls=[{"id": "c1", "name": "get_weather", "args": {"city": "Oslo"}}], id="a")
    converted = from_langchain([ToolMessage(content="snow", tool_call_id="c1", id="r")], history=[call])
    assert converted[0].tool_results[0].tool_name == "get_weather"
    assert converted[0].tool_results[0].result == "snow"


def test_reasoning_content_and_invalid_tool_calls_are_kept() -> None:
    message = AIMessage(
        content="answer", additional_kwargs={"reasoning_content": "let me think"}, id="a",
        invalid_tool_calls=[{"type": "invalid_tool_call", "id": "c9", "name": "calc", "args": "{oops", "error": "bad"}],
    )
    [converted] = from_langchain([message])
    assert converted.parts == (
        ReasoningPart(text="let me think"), TextPart(text="answer"),
        ToolCallPart(tool_call_id="c9", tool_name="calc", args="{oops"),
    )


def test_a_non_message_is_refused_with_its_index() -> None:
    with pytest.raises(InvalidInputError, match=r"messages\[1\]"):
        from_langchain([HumanMessage("hi"), "hello"])  # type: ignore[list-item]


def test_importing_obsmem_imports_no_framework() -> None:
    code = (
        "import sys, obsmem, obsmem.integrations\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'langchain', 'langchain_core', 'langgraph', 'agent_framework', 'langchain_openai'})\n"
        "print(loaded)\n"
        "import obsmem.integrations.langchain\n"
        "print('langchain_core' in sys.modules)\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert output[0] == "[]"
    assert output[1] == "True"  # positive control: the integration itself does load LangChain


def test_the_middleware_needs_a_memory() -> None:
    from obsmem.integrations.langchain import ObservationalMemoryMiddleware

    with pytest.raises(InvalidInputError, match="memory"):
        ObservationalMemoryMiddleware("not a memory")  # type: ignore[arg-type]
