"""obsmem ↔ OpenAI Responses API items: table tests of each shape, reasoning replay, and the errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from obsmem.convert import (
    from_openai_responses,
    to_anthropic,
    to_openai,
    to_openai_responses,
)
from obsmem.errors import InvalidInputError
from obsmem.types import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from tests.convert.validators import assert_valid_openai_responses


def _msg(role: str, *parts: Any) -> Message:
    return Message(role=role, parts=parts)


def _call(call_id: str, args: dict[str, Any] | str | None = None) -> ToolCallPart:
    return ToolCallPart(
        tool_call_id=call_id, tool_name="lookup", args={"q": call_id} if args is None else args
    )


def _result(call_id: str, result: Any = "ok") -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name="lookup", result=result)


def _text(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    part: dict[str, Any] = {"type": kind, "text": text}
    if role == "assistant":
        part["annotations"] = []
    return {"type": "message", "role": role, "content": [part]}


TO_CASES: list[tuple[str, list[Message], list[dict[str, Any]]]] = [
    (
        "text of every role",
        [Message.system("rules"), Message.user("hi"), Message.assistant("hello")],
        [_text("system", "rules"), _text("user", "hi"), _text("assistant", "hello")],
    ),
    (
        "attachments",
        [
            _msg(
                "user",
                TextPart(text="see"),
                FilePart(media_type="image/png", url="https://x/a.png"),
                FilePart(media_type="image/gif", data="QUJD", detail="high"),
                FilePart(media_type="application/pdf", data="QUJD", filename="r.pdf"),
                FilePart(media_type="application/pdf", url="https://x/r.pdf"),
            )
        ],
        [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "see"},
                    {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"},
                    {"type": "input_image", "image_url": "data:image/gif;base64,QUJD", "detail": "high"},
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64,QUJD",
                        "filename": "r.pdf",
                    },
                    {"type": "input_file", "file_url": "https://x/r.pdf"},
                ],
            }
        ],
    ),
    (
        "parallel calls in part order, outputs JSON-encoded",
        [
            _msg("assistant", TextPart(text="checking"), _call("c1"), _call("c2", args="raw")),
            _msg("tool", _result("c2", {"n": 2}), _result("c1")),
        ],
        [
            _text("assistant", "checking"),
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "c1"}'},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "raw"},
            {"type": "function_call_output", "call_id": "c2", "output": '{"n": 2}'},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
    ),
    (
        "reasoning without its provider item is dropped, data parts too",
        [_msg("assistant", ReasoningPart(text="hmm"), TextPart(text="done"), DataPart(name="om-x"))],
        [_text("assistant", "done")],
    ),
    (
        "results inside a user message come before its text",
        [_msg("assistant", _call("c1")), _msg("user", _result("c1"), TextPart(text="thanks"))],
        [
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "c1"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            _text("user", "thanks"),
        ],
    ),
]


@pytest.mark.parametrize(("messages", "expected"), [c[1:] for c in TO_CASES], ids=[c[0] for c in TO_CASES])
def test_to_openai_responses(messages: list[Message], expected: list[dict[str, Any]]) -> None:
    items = to_openai_responses(messages)
    assert items == expected
    assert_valid_openai_responses(items)
    json.dumps(items)


def test_developer_role() -> None:
    assert to_openai_responses([Message.system("x")], system_role="developer") == [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "x"}]}
    ]


# A response.output as the API returns it (model_dump of the SDK objects, None fields included).
OUTPUT: list[dict[str, Any]] = [
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Need the weather."}],
        "encrypted_content": "gAAA…",
        "content": None,
        "status": None,
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Let me check.", "annotations": [], "logprobs": []}],
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_a",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
        "status": "completed",
    },
    {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "call_b",
        "name": "time",
        "arguments": "{}",
        "status": "completed",
    },
]


def test_from_openai_responses_groups_one_assistant_turn_and_replays_its_reasoning() -> None:
    [assistant] = from_openai_responses(OUTPUT)
    assert assistant.role == "assistant"
    assert isinstance(assistant.parts[0], ReasoningPart) and assistant.parts[0].text == "Need the weather."
    assert assistant.text == "Let me check."
    assert [(c.tool_call_id, c.tool_name, c.args) for c in assistant.tool_calls] == [
        ("call_a", "weather", {"city": "Oslo"}),
        ("call_b", "time", {}),
    ]
    json.dumps(assistant.metadata)  # storable as is

    outputs = [
        {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_b", "output": "noon"},
    ]
    [tool] = from_openai_responses(outputs, history=[assistant])
    assert [(r.tool_call_id, r.tool_name, r.result) for r in tool.tool_results] == [
        ("call_a", "weather", "sunny"),
        ("call_b", "time", "noon"),
    ]

    items = to_openai_responses([Message.user("weather?"), assistant, tool])
    assert items[1] == {
        "id": "rs_1",
        "type": "reasoning",
        "encrypted_content": "gAAA…",
        "summary": [{"type": "summary_text", "text": "Need the weather."}],
    }
    assert [i["type"] for i in items] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert_valid_openai_responses(items)
    # Other providers never receive OpenAI's reasoning.
    assert all(
        m.get("role") != "assistant" or m.get("content") or m.get("tool_calls")
        for m in to_openai([assistant])
    )
    assert "reasoning" not in json.dumps(to_openai([assistant]))
    assert "gAAA" not in json.dumps(to_anthropic([assistant]))


def test_from_openai_responses_reads_input_items() -> None:
    messages = from_openai_responses(
        [
            {"role": "developer", "content": "rules"},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,QUJD", "detail": "low"},
                    {"type": "input_file", "file_url": "https://x/r.pdf"},
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64,QUJD",
                        "filename": "a.pdf",
                    },
                ],
            },
            {"type": "message", "role": "user", "content": "second"},
            {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        ]
    )
    assert [(m.role, m.text) for m in messages] == [
        ("system", "rules"),
        ("user", "look"),
        ("user", "second"),
        ("assistant", "no"),
    ]
    files = [p for p in messages[1].parts if isinstance(p, FilePart)]
    assert [(f.media_type, f.data, f.url, f.detail, f.filename) for f in files] == [
        ("image/png", "QUJD", None, "low", None),
        ("application/pdf", None, "https://x/r.pdf", None, None),
        ("application/pdf", "QUJD", None, None, "a.pdf"),
    ]


ERROR_CASES: list[tuple[str, list[Any], str]] = [
    ("no type, no role", [{"content": "x"}], "index 0, field 'type'"),
    (
        "built-in tool item",
        [
            {"type": "message", "role": "user", "content": "x"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        ],
        "index 1, field 'type': unsupported item type 'web_search_call'",
    ),
    ("unknown role", [{"type": "message", "role": "critic", "content": "x"}], "field 'role'"),
    ("message without content", [{"type": "message", "role": "user"}], "field 'content'"),
    (
        "input part in an assistant message",
        [{"type": "message", "role": "assistant", "content": [{"type": "input_image", "image_url": "u"}]}],
        "field 'content[0].type'",
    ),
    (
        "image by file id",
        [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}],
        "field 'content[0].image_url'",
    ),
    ("call without call_id", [{"type": "function_call", "name": "f", "arguments": "{}"}], "field 'call_id'"),
    ("call without name", [{"type": "function_call", "call_id": "c", "arguments": "{}"}], "field 'name'"),
    (
        "arguments not text",
        [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}],
        "field 'arguments'",
    ),
    (
        "orphan output",
        [{"type": "function_call_output", "call_id": "c", "output": "x"}],
        "field 'call_id': no earlier tool call has id 'c'",
    ),
    (
        "output missing",
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c"},
        ],
        "index 1, field 'output'",
    ),
    (
        "bad summary",
        [{"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text"}]}],
        "field 'summary[0].text'",
    ),
]


@pytest.mark.parametrize(("items", "where"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_from_openai_responses_names_the_item_and_field(items: list[Any], where: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        from_openai_responses(items)
    assert "OpenAI Responses item" in str(caught.value)
    assert where in str(caught.value)


def test_corrupt_replay_metadata_is_a_typed_error() -> None:
    message = _msg("assistant", ReasoningPart(text="x"), TextPart(text="y"))
    broken = message.model_copy(update={"metadata": {"provider_reasoning": "nope"}})
    with pytest.raises(InvalidInputError, match="provider_reasoning"):
        to_openai_responses([broken])
