"""obsmem ↔ Anthropic Messages: table tests of each shape, merging, thinking replay, and the errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from obsmem.convert import from_anthropic, to_anthropic, to_openai_responses
from obsmem.errors import InvalidInputError
from obsmem.types import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from tests.convert.validators import assert_valid_anthropic


def _msg(role: str, *parts: Any) -> Message:
    return Message(role=role, parts=parts)


def _call(call_id: str, args: dict[str, Any] | str | None = None) -> ToolCallPart:
    return ToolCallPart(
        tool_call_id=call_id, tool_name="lookup", args={"q": call_id} if args is None else args
    )


def _result(call_id: str, result: Any = "ok", **kw: Any) -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name="lookup", result=result, **kw)


def _use(call_id: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "lookup",
        "input": {"q": call_id} if args is None else args,
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


TO_CASES: list[tuple[str, list[Message], list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "system messages go to the system blocks, blank ones dropped",
        [Message.system("rules"), Message.system("  "), Message.user("hi"), Message.system("late rule")],
        [_text("rules"), _text("late rule")],
        [{"role": "user", "content": [_text("hi")]}],
    ),
    (
        "consecutive same-side messages merge; data parts and blank text vanish",
        [
            Message.user("a"),
            _msg("user", TextPart(text=" "), DataPart(name="om-x"), TextPart(text="b")),
            Message.assistant("c"),
            Message.assistant("d"),
        ],
        [],
        [
            {"role": "user", "content": [_text("a"), _text("b")]},
            {"role": "assistant", "content": [_text("c"), _text("d")]},
        ],
    ),
    (
        "parallel results become one user turn, tool_result first, errors kept, non-strings JSON",
        [
            Message.user("go"),
            _msg("assistant", TextPart(text="on it"), _call("c1"), _call("c2", args="raw")),
            _msg("tool", _result("c2", {"n": 2}, is_error=True)),
            _msg("tool", _result("c1", "")),
            Message.user("and then?"),
        ],
        [],
        [
            {"role": "user", "content": [_text("go")]},
            {"role": "assistant", "content": [_text("on it"), _use("c1"), _use("c2", {"input": "raw"})]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c2", "content": '{"n": 2}', "is_error": True},
                    {"type": "tool_result", "tool_use_id": "c1"},
                    _text("and then?"),
                ],
            },
        ],
    ),
    (
        "a user message written before the results still lets the results lead the turn",
        [
            Message.user("go"),
            _msg("assistant", _call("c1")),
            _msg("user", TextPart(text="hurry"), _result("c1")),
        ],
        [],
        [
            {"role": "user", "content": [_text("go")]},
            {"role": "assistant", "content": [_use("c1")]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}, _text("hurry")],
            },
        ],
    ),
    (
        "JSON-object text arguments become the input object",
        [
            Message.user("go"),
            _msg("assistant", _call("c1", args='{"a": 1}'), _call("c2", args="")),
            _msg("tool", _result("c1"), _result("c2")),
        ],
        [],
        [
            {"role": "user", "content": [_text("go")]},
            {"role": "assistant", "content": [_use("c1", {"a": 1}), _use("c2", {})]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "ok"},
                ],
            },
        ],
    ),
    (
        "attachments",
        [
            _msg(
                "user",
                FilePart(media_type="image/png", data="data:image/png;base64,QUJD"),
                FilePart(media_type="image/webp", url="https://x/a.webp"),
                FilePart(media_type="application/pdf", data="QUJD", filename="r.pdf"),
                FilePart(media_type="application/pdf", url="https://x/r.pdf"),
                FilePart(media_type="text/plain", data="aGVsbG8="),
                FilePart(media_type="application/zip", data="QUJD", filename="a.zip"),
                FilePart(media_type="image/bmp", data="QUJD", filename="b.bmp"),
            )
        ],
        [],
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x/a.webp"}},
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": "QUJD"},
                        "title": "r.pdf",
                    },
                    {"type": "document", "source": {"type": "url", "url": "https://x/r.pdf"}},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "hello"},
                    },
                    _text("[attachment: a.zip]"),
                    _text("[attachment: b.bmp]"),
                ],
            }
        ],
    ),
    (
        "reasoning without its thinking block is dropped",
        [Message.user("q"), _msg("assistant", ReasoningPart(text="hmm"), TextPart(text="a"))],
        [],
        [{"role": "user", "content": [_text("q")]}, {"role": "assistant", "content": [_text("a")]}],
    ),
]


@pytest.mark.parametrize(
    ("messages", "system", "expected"), [c[1:] for c in TO_CASES], ids=[c[0] for c in TO_CASES]
)
def test_to_anthropic(
    messages: list[Message], system: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    got_system, wire = to_anthropic(messages)
    assert got_system == system
    assert wire == expected
    assert_valid_anthropic(got_system, wire)
    json.dumps([got_system, wire])


def test_to_anthropic_refuses_a_tool_call_outside_an_assistant_message() -> None:
    with pytest.raises(InvalidInputError, match="only assistant messages call tools"):
        to_anthropic([_msg("tool", _call("c1"))])


# A response as the API returns it (model_dump of the SDK object).
RESPONSE: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 10, "output_tokens": 5},
    "content": [
        {"type": "thinking", "thinking": "Need weather.", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Checking.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_2", "name": "time", "input": {}},
    ],
}


def test_from_anthropic_reads_a_response_and_replays_its_thinking() -> None:
    [assistant] = from_anthropic([RESPONSE])
    assert [type(p).__name__ for p in assistant.parts] == [
        "ReasoningPart",
        "ReasoningPart",
        "TextPart",
        "ToolCallPart",
        "ToolCallPart",
    ]
    assert assistant.parts[0] == ReasoningPart(text="Need weather.")
    assert [(c.tool_call_id, c.tool_name, c.args) for c in assistant.tool_calls] == [
        ("toolu_1", "weather", {"city": "Oslo"}),
        ("toolu_2", "time", {}),
    ]
    json.dumps(assistant.metadata)

    results = from_anthropic(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [_text("sunny"), _text("12C")],
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "noon", "is_error": True},
                    _text("thanks"),
                ],
            }
        ],
        history=[assistant],
    )
    assert [m.role for m in results] == ["tool", "user"]
    assert [(r.tool_name, r.result, r.is_error) for r in results[0].tool_results] == [
        ("weather", "sunny\n12C", False),
        ("time", "noon", True),
    ]

    system, wire = to_anthropic([Message.user("weather?"), assistant, *results])
    assert wire[1]["content"][:2] == [
        {"type": "thinking", "thinking": "Need weather.", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert_valid_anthropic(system, wire)
    assert "sig==" not in json.dumps(to_openai_responses([assistant]))


def test_from_anthropic_system_forms_and_user_content() -> None:
    messages = from_anthropic(
        [
            {"role": "user", "content": "plain"},
            {"role": "assistant", "content": "reply"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/gif", "data": "QUJD"},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x/cat.png"}},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "hello"},
                        "title": "notes.txt",
                    },
                    {
                        "type": "document",
                        "source": {"type": "url", "url": "https://x/r.pdf"},
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
        ],
        system=[{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
    )
    assert [(m.role, m.text) for m in messages[:4]] == [
        ("system", "one"),
        ("system", "two"),
        ("user", "plain"),
        ("assistant", "reply"),
    ]
    files = [p for p in messages[4].parts if isinstance(p, FilePart)]
    assert [(f.media_type, f.data, f.url, f.filename) for f in files] == [
        ("image/gif", "QUJD", None, None),
        ("image/png", None, "https://x/cat.png", None),
        ("text/plain", "aGVsbG8=", None, "notes.txt"),
        ("application/pdf", None, "https://x/r.pdf", None),
    ]
    assert [m.role for m in from_anthropic([], system="just rules")] == ["system"]


ERROR_CASES: list[tuple[str, list[Any], str]] = [
    ("system role in messages", [{"role": "system", "content": "x"}], "index 0, field 'role'"),
    ("no content", [{"role": "user"}], "index 0, field 'content'"),
    (
        "unknown block",
        [
            {"role": "user", "content": "ok"},
            {
                "role": "assistant",
                "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}],
            },
        ],
        "index 1, field 'content[0].type'",
    ),
    (
        "tool_use in a user turn",
        [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}],
        "field 'content[0].type'",
    ),
    (
        "tool_use input not an object",
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}],
        "field 'content[0].input'",
    ),
    (
        "tool_use without id",
        [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
        "field 'content[0].id'",
    ),
    (
        "orphan tool_result",
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
        "field 'content[0].tool_use_id': no earlier tool call has id 't'",
    ),
    (
        "thinking without signature",
        [{"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}],
        "field 'content[0].signature'",
    ),
    (
        "image from a file id",
        [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}],
        "field 'content[0].source.type'",
    ),
    ("block not an object", [{"role": "user", "content": ["text"]}], "field 'content[0]'"),
]


@pytest.mark.parametrize(("items", "where"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_from_anthropic_names_the_item_and_field(items: list[Any], where: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        from_anthropic(items)
    assert "Anthropic message" in str(caught.value)
    assert where in str(caught.value)


def test_from_anthropic_bad_system_prompt() -> None:
    with pytest.raises(InvalidInputError, match="system prompt at index 0, field '\\[0\\].type'"):
        from_anthropic([], system=[{"type": "image", "source": {}}])
