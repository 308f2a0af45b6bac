"""The provider validators flag exactly the sequences providers reject (each case a known 400)."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart
from tests.convert.validators import (
    anthropic_problems,
    assert_valid_for_providers,
    openai_chat_problems,
    openai_responses_problems,
    provider_problems,
    tool_pairing_problems,
)


def _calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }


def _tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


USER = {"role": "user", "content": "q"}

CHAT_CASES: list[tuple[str, list[dict[str, Any]], str | None]] = [
    (
        "valid parallel calls",
        [USER, _calls("a", "b"), _tool("b"), _tool("a"), {"role": "assistant", "content": "x"}],
        None,
    ),
    ("orphan tool message", [USER, _tool("a")], "does not follow an assistant message"),
    ("tool answers a call of another message", [USER, _calls("a"), _tool("b")], "did not call"),
    ("answered twice", [USER, _calls("a"), _tool("a"), _tool("a")], "already answered"),
    (
        "user before the results",
        [USER, _calls("a", "b"), _tool("a"), USER, _tool("b")],
        "before the calls ['b']",
    ),
    ("never answered", [USER, _calls("a")], "never answered"),
    (
        "assistant with nothing",
        [USER, {"role": "assistant", "content": None}],
        "neither content nor tool_calls",
    ),
    (
        "image part in a system message",
        [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
        "not allowed in a system message",
    ),
    ("unknown role", [{"role": "function", "content": "x"}], "unknown role"),
]


@pytest.mark.parametrize(("wire", "problem"), [c[1:] for c in CHAT_CASES], ids=[c[0] for c in CHAT_CASES])
def test_openai_chat_rules(wire: list[dict[str, Any]], problem: str | None) -> None:
    found = openai_chat_problems(wire)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def test_pending_calls_allowed_only_at_the_very_end() -> None:
    assert openai_chat_problems([USER, _calls("a", "b"), _tool("a")], allow_pending_calls=True) == []
    assert openai_chat_problems([USER, _calls("a"), USER], allow_pending_calls=True)


def _fc(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def _out(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "r"}


RESPONSES_CASES: list[tuple[str, list[dict[str, Any]], str | None]] = [
    (
        "valid",
        [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "id": "rs", "summary": []},
            _fc("a"),
            _fc("b"),
            _out("b"),
            _out("a"),
        ],
        None,
    ),
    ("orphan output", [_out("a")], "answers no earlier unanswered function_call"),
    ("user before the output", [_fc("a"), {"role": "user", "content": "q"}, _out("a")], "before the calls"),
    ("reasoning at the end", [{"type": "reasoning", "id": "rs", "summary": []}], "not followed"),
    ("reasoning without id", [{"type": "reasoning", "summary": []}, _fc("a"), _out("a")], "needs its id"),
    (
        "input_text in an assistant message",
        [{"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "x"}]}],
        "not allowed in a assistant message",
    ),
    (
        "image without detail",
        [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}],
        "detail",
    ),
    ("never answered", [_fc("a")], "never answered"),
]


@pytest.mark.parametrize(
    ("items", "problem"), [c[1:] for c in RESPONSES_CASES], ids=[c[0] for c in RESPONSES_CASES]
)
def test_openai_responses_rules(items: list[dict[str, Any]], problem: str | None) -> None:
    found = openai_responses_problems(items)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def _a(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def _u(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def _use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}


def _res(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "r"}


TEXT = {"type": "text", "text": "x"}

ANTHROPIC_CASES: list[tuple[str, Any, list[dict[str, Any]], str | None]] = [
    (
        "valid",
        [TEXT],
        [_u(TEXT), _a(TEXT, _use("a"), _use("b")), _u(_res("b"), _res("a"), TEXT), _a(TEXT)],
        None,
    ),
    ("no alternation", [], [_u(TEXT), _u(TEXT)], "roles must alternate"),
    (
        "result not in the next turn",
        [],
        [_u(TEXT), _a(_use("a")), _u(TEXT), _a(TEXT), _u(_res("a"))],
        "have no tool_result in this turn",
    ),
    ("text before a result", [], [_u(TEXT), _a(_use("a")), _u(TEXT, _res("a"))], "must come before"),
    ("orphan result", [], [_u(_res("a"))], "answers no tool_use"),
    ("blank text", [], [_u({"type": "text", "text": "  "})], "non-whitespace"),
    ("blank system", [{"type": "text", "text": " "}], [_u(TEXT)], "system[0]"),
    ("system role in messages", [], [{"role": "system", "content": "x"}], "role must be user or assistant"),
    ("no messages", [], [], "at least one message"),
    (
        "unsupported image type",
        [],
        [_u({"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "x"}})],
        "not accepted",
    ),
    (
        "tool_use input not an object",
        [],
        [_u(TEXT), _a({"type": "tool_use", "id": "a", "name": "f", "input": "x"})],
        "input object",
    ),
]


@pytest.mark.parametrize(
    ("system", "wire", "problem"), [c[1:] for c in ANTHROPIC_CASES], ids=[c[0] for c in ANTHROPIC_CASES]
)
def test_anthropic_rules(system: Any, wire: list[dict[str, Any]], problem: str | None) -> None:
    found = anthropic_problems(system, wire)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def test_first_user_turn_is_optional() -> None:
    wire = [_a(TEXT), _u(TEXT)]
    assert anthropic_problems([], wire) == []
    assert anthropic_problems([], wire, require_user_first=True)


def _call(call_id: str) -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name="f")


def _result(call_id: str) -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name="f", result="r")


def test_obsmem_level_pairing() -> None:
    ok = [
        Message.user("q"),
        Message(role="assistant", parts=(_call("a"), _call("b"))),
        Message(role="tool", parts=(_result("b"),)),
        Message(role="tool", parts=(_result("a"),)),
        Message.assistant("done"),
    ]
    assert tool_pairing_problems(ok) == []
    assert_valid_for_providers(ok)

    orphan = [Message.user("q"), Message(role="tool", parts=(_result("a"),))]
    assert any("no earlier call" in p for p in tool_pairing_problems(orphan))
    split = [
        Message.user("q"),
        Message(role="assistant", parts=(_call("a"), _call("b"))),
        Message(role="tool", parts=(_result("a"),)),
        Message.user("again"),
        Message(role="tool", parts=(_result("b"),)),
    ]
    assert any("comes before the results of calls ['b']" in p for p in tool_pairing_problems(split))
    # OpenAI sees the split; Anthropic's merged user turn puts both results ahead of the text.
    assert set(provider_problems(split)) == {"obsmem", "openai", "openai-responses"}
    answered_in_user = [
        Message.user("q"),
        Message(role="assistant", parts=(_call("a"),)),
        Message(role="user", parts=(_result("a"), TextPart(text="and?"))),
    ]
    assert provider_problems(answered_in_user) == {}
    with pytest.raises(AssertionError, match="invalid for the provider"):
        assert_valid_for_providers(split)
