"""obsmem ↔ OpenAI Chat Completions: table tests of each shape, both ways, and the errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from obsmem.convert import from_openai, to_openai
from obsmem.errors import InvalidInputError
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from tests.convert.validators import assert_valid_openai_chat


def _call(call_id: str, name: str = "lookup", args: dict[str, Any] | str | None = None) -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"q": call_id} if args is None else args)


def _result(call_id: str, result: Any = "ok", name: str = "lookup", **kw: Any) -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name=name, result=result, **kw)


def _msg(role: str, *parts: Any) -> Message:
    return Message(role=role, parts=parts)


# -- to_openai -----------------------------------------------------------------------------

TO_CASES: list[tuple[str, list[Message], list[dict[str, Any]]]] = [
    (
        "plain text",
        [Message.system("rules"), Message.user("hi"), Message.assistant("hello")],
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ],
    ),
    (
        "two text parts stay parts",
        [_msg("user", TextPart(text="a"), TextPart(text="b"))],
        [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    ),
    (
        "image by URL with detail",
        [
            _msg(
                "user",
                TextPart(text="see"),
                FilePart(media_type="image/png", url="https://x/a.png", detail="low"),
            )
        ],
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
                ],
            }
        ],
    ),
    (
        "inline image as a data URI",
        [_msg("user", FilePart(media_type="image/jpeg", data="QUJD"))],
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}}],
            }
        ],
    ),
    (
        "wav audio",
        [_msg("user", FilePart(media_type="audio/wav", data="QUJD"))],
        [
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "QUJD", "format": "wav"}}],
            }
        ],
    ),
    (
        "inline pdf",
        [_msg("user", FilePart(media_type="application/pdf", data="QUJD", filename="a.pdf"))],
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "file",
                        "file": {"file_data": "data:application/pdf;base64,QUJD", "filename": "a.pdf"},
                    }
                ],
            }
        ],
    ),
    (
        "a URL-only document becomes a named placeholder",
        [_msg("user", FilePart(media_type="application/pdf", url="https://x/r.pdf"))],
        [{"role": "user", "content": "[attachment: https://x/r.pdf]"}],
    ),
    (
        "calls only: content None, arguments a JSON string",
        [
            _msg("assistant", _call("c1", args={"city": "Paris"}), _call("c2", args='{"raw": 1}')),
            _msg("tool", _result("c1", {"temp": 21}), _result("c2", [1, 2])),
        ],
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"raw": 1}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
            {"role": "tool", "tool_call_id": "c2", "content": "[1, 2]"},
        ],
    ),
    (
        "reasoning and data parts never go; a data-only message disappears",
        [
            _msg("assistant", ReasoningPart(text="hmm"), TextPart(text="done"), DataPart(name="om-x")),
            _msg("user", DataPart(name="om-observation-start", data={"a": 1})),
        ],
        [{"role": "assistant", "content": "done"}],
    ),
    ("a reasoning-only assistant message disappears", [_msg("assistant", ReasoningPart(text="hmm"))], []),
    (
        "results for earlier calls go before the message, its own calls' results after",
        [
            _msg("assistant", _call("c1")),
            _msg("assistant", _result("c1"), TextPart(text="next"), _call("c2"), _result("c2", "two")),
        ],
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "c1"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {
                "role": "assistant",
                "content": "next",
                "tool_calls": [
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "c2"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
        ],
    ),
    (
        "a tool message's own text follows its results as a user message",
        [_msg("assistant", _call("c1")), _msg("tool", _result("c1"), TextPart(text="note"))],
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "c1"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "user", "content": "note"},
        ],
    ),
    (
        "an attachment in an assistant message becomes a placeholder",
        [
            _msg(
                "assistant",
                TextPart(text="here"),
                FilePart(media_type="image/png", url="https://x/p.png", filename="p.png"),
            )
        ],
        [{"role": "assistant", "content": "here\n[attachment: p.png]"}],
    ),
]


@pytest.mark.parametrize(("messages", "expected"), [c[1:] for c in TO_CASES], ids=[c[0] for c in TO_CASES])
def test_to_openai(messages: list[Message], expected: list[dict[str, Any]]) -> None:
    wire = to_openai(messages)
    assert wire == expected
    assert_valid_openai_chat(wire)
    json.dumps(wire)  # plain JSON, ready for the wire


def test_to_openai_developer_role_and_dict_messages() -> None:
    wire = to_openai(
        [{"role": "system", "parts": [{"type": "text", "text": "be brief"}]}], system_role="developer"
    )
    assert wire == [{"role": "developer", "content": "be brief"}]
    with pytest.raises(InvalidInputError, match="system_role"):
        to_openai([], system_role="boss")  # type: ignore[arg-type]


def test_to_openai_refuses_a_tool_call_outside_an_assistant_message() -> None:
    with pytest.raises(InvalidInputError, match="only assistant messages call tools"):
        to_openai([_msg("user", _call("c1"))])


def test_to_openai_refuses_a_malformed_message_with_the_typed_error() -> None:
    with pytest.raises(InvalidInputError, match="role"):
        to_openai([{"role": "wizard", "parts": [{"type": "text", "text": "x"}]}])
    with pytest.raises(InvalidInputError, match="list of obsmem messages"):
        to_openai(Message.user("not in a list"))  # type: ignore[arg-type]


# -- from_openai ---------------------------------------------------------------------------


def test_from_openai_reads_every_role_and_content_form() -> None:
    messages = from_openai(
        [
            {"role": "developer", "content": "rules"},
            {"role": "system", "content": [{"type": "text", "text": "more"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,QUJD", "detail": "high"},
                    },
                    {"type": "image_url", "image_url": {"url": "https://x/cat.webp"}},
                    {"type": "input_audio", "input_audio": {"data": "QUJD", "format": "mp3"}},
                    {
                        "type": "file",
                        "file": {"file_data": "data:application/pdf;base64,QUJD", "filename": "r.pdf"},
                    },
                ],
            },
            {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
            },
            {
                "role": "assistant",
                "reasoning_content": "thinking…",
                "content": "sure",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "two"}]},
        ]
    )
    assert [m.role for m in messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "tool",
        "tool",
    ]
    assert [m.text for m in messages[:2]] == ["rules", "more"]
    files = [p for p in messages[2].parts if isinstance(p, FilePart)]
    assert [(f.media_type, f.data, f.url, f.detail) for f in files] == [
        ("image/png", "QUJD", None, "high"),
        ("image/webp", None, "https://x/cat.webp", None),
        ("audio/mpeg", "QUJD", None, None),
        ("application/pdf", "QUJD", None, None),
    ]
    assert files[3].filename == "r.pdf"
    assert messages[3].text == "I can't help with that."
    assert messages[4].text == "a\nb"
    answer = messages[5]
    assert isinstance(answer.parts[0], ReasoningPart) and answer.parts[0].text == "thinking…"
    assert answer.text == "sure"
    assert [(c.tool_call_id, c.tool_name, c.args) for c in answer.tool_calls] == [
        ("c1", "f", {"x": 1}),
        ("c2", "g", "not json"),
    ]
    assert [(r.tool_call_id, r.tool_name, r.result) for m in messages[6:] for r in m.tool_results] == [
        ("c1", "f", "one"),
        ("c2", "g", "two"),
    ]


class _SdkObject:
    """Stands in for an SDK object (openai's ChatCompletionMessage): only ``model_dump``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        return {k: v for k, v in self._data.items() if v is not None or not exclude_none}


def test_from_openai_takes_sdk_objects_and_names_tools_from_history() -> None:
    reply = _SdkObject(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "function_call": None,
            "audio": None,
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "search", "arguments": "{}"}}
            ],
        }
    )
    [assistant] = from_openai([reply])
    assert assistant.tool_calls[0].tool_name == "search" and assistant.tool_calls[0].args == {}
    [tool] = from_openai([{"role": "tool", "tool_call_id": "c9", "content": "found"}], history=[assistant])
    assert tool.tool_results[0].tool_name == "search"


ERROR_CASES: list[tuple[str, list[Any], str]] = [
    ("role missing", [{"content": "x"}], "index 0, field 'role'"),
    (
        "unknown role",
        [{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}],
        "index 1, field 'role'",
    ),
    ("legacy function role", [{"role": "function", "name": "f", "content": "x"}], "index 0, field 'role'"),
    ("item not an object", ["hello"], "index 0: expected an object"),
    ("user without content", [{"role": "user"}], "index 0, field 'content'"),
    (
        "unknown content part",
        [{"role": "user", "content": [{"type": "video", "url": "x"}]}],
        "field 'content[0].type'",
    ),
    (
        "image without url",
        [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        "field 'content[0].image_url.url'",
    ),
    (
        "bad detail",
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "max"}}]}],
        "field 'content[0].image_url.detail'",
    ),
    (
        "file by id",
        [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}],
        "field 'content[0].file.file_data'",
    ),
    (
        "call without id",
        [
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            }
        ],
        "field 'tool_calls[0].id'",
    ),
    (
        "arguments not a string",
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
                ],
            }
        ],
        "field 'tool_calls[0].function.arguments'",
    ),
    (
        "custom tool call",
        [{"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}],
        "field 'tool_calls[0].type'",
    ),
    ("tool_calls not a list", [{"role": "assistant", "tool_calls": "c1"}], "field 'tool_calls'"),
    (
        "legacy function_call",
        [{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}],
        "field 'function_call'",
    ),
    (
        "orphan tool result",
        [{"role": "tool", "tool_call_id": "nope", "content": "x"}],
        "index 0, field 'tool_call_id': no earlier tool call has id 'nope'",
    ),
    ("tool without id", [{"role": "tool", "content": "x"}], "field 'tool_call_id'"),
]


@pytest.mark.parametrize(("items", "where"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_from_openai_names_the_item_and_field_of_every_problem(items: list[Any], where: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        from_openai(items)
    assert "OpenAI chat message" in str(caught.value)
    assert where in str(caught.value)


def test_from_openai_wants_a_list() -> None:
    with pytest.raises(InvalidInputError, match="wrap a single one in a list"):
        from_openai({"role": "user", "content": "x"})
