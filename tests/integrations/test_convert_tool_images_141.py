"""Converters: an image a tool returns stays an image (helper-141).

Anthropic's ``tool_result`` content and the Responses API's ``function_call_output`` output may
hold images (a screenshot tool, a chart tool) beside text. ``from_anthropic`` /
``from_openai_responses`` kept those blocks in the tool result as JSON: a 30 KB image counted as
~27,400 tokens, the observer read its base64, and ``to_anthropic`` / ``to_openai_responses`` sent
the content back as one JSON string, so the model got the image as text in later turns. Now the
texts are the result and each image a file part right after it in the tool message, sent back in
the result's content as it came (and, for Chat Completions, whose tool messages take no images,
in a user message after the tool messages).
"""

from __future__ import annotations

import base64
import os
from typing import Any

from obsmem import from_anthropic, from_openai_responses, to_anthropic, to_openai, to_openai_responses
from obsmem.tokens import default_counter
from obsmem.types import FilePart, Message, TextPart, ToolCallPart, ToolResultPart

IMAGE = base64.b64encode(os.urandom(30_000)).decode()
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()


def _shape(messages: list[Message]) -> list[tuple[str, list[str]]]:
    return [(m.role, [type(p).__name__ for p in m.parts]) for m in messages]


def test_anthropic_tool_result_images_and_documents_round_trip() -> None:
    call = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}},
        {"type": "tool_use", "id": "t2", "name": "report", "input": {}},
    ]}
    shot = [{"type": "text", "text": "the login page"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE}}]
    report = [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}}]
    answer = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": shot},
        {"type": "tool_result", "tool_use_id": "t2", "content": report},
        {"type": "text", "text": "what do you see?"},
    ]}
    messages = from_anthropic([call, answer])
    assert _shape(messages) == [
        ("assistant", ["ToolCallPart", "ToolCallPart"]),
        ("tool", ["ToolResultPart", "FilePart", "ToolResultPart", "FilePart"]),
        ("user", ["TextPart"]),
    ]
    results = messages[1].tool_results
    assert [r.result for r in results] == ["the login page", ""]
    assert default_counter().count_message(messages[1]) < 5_000
    _, wire = to_anthropic(messages)
    assert wire[1]["content"][0] == {"type": "tool_result", "tool_use_id": "t1", "content": shot}
    assert wire[1]["content"][1] == {"type": "tool_result", "tool_use_id": "t2", "content": report}
    assert wire[1]["content"][2] == {"type": "text", "text": "what do you see?"}
    assert len(wire[1]["content"]) == 3


def test_responses_function_call_output_images_round_trip() -> None:
    output: list[dict[str, Any]] = [
        {"type": "input_text", "text": "the login page"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}", "detail": "auto"},
    ]
    items = [
        {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
        {"type": "function_call_output", "call_id": "c0", "output": [{"type": "input_text", "text": "plain"}]},
    ]
    history = [Message(role="assistant", parts=(ToolCallPart(tool_call_id="c0", tool_name="t", args={}),))]
    messages = from_openai_responses(items, history=history)
    assert _shape(messages) == [
        ("assistant", ["ToolCallPart"]), ("tool", ["ToolResultPart", "FilePart", "ToolResultPart"]),
    ]
    assert messages[1].tool_results[0].result == "the login page"
    assert messages[1].tool_results[1].result == [{"type": "input_text", "text": "plain"}]  # as before
    assert default_counter().count_message(messages[1]) < 5_000
    wire = to_openai_responses(messages)
    assert wire[1] == items[1]
    assert len(wire) == 3


def test_chat_completions_sends_the_image_after_the_tool_messages() -> None:
    messages = [
        Message(role="assistant", parts=(
            ToolCallPart(tool_call_id="a", tool_name="shot", args={}),
            ToolCallPart(tool_call_id="b", tool_name="shot", args={}),
        )),
        Message(role="tool", parts=(
            ToolResultPart(tool_call_id="a", tool_name="shot", result="page a"),
            FilePart(media_type="image/png", data=IMAGE),
            ToolResultPart(tool_call_id="b", tool_name="shot", result="page b"),
        )),
        Message(role="user", parts=(TextPart(text="compare them"),)),
    ]
    wire = to_openai(messages)
    assert [w["role"] for w in wire] == ["assistant", "tool", "tool", "user", "user"]
    assert wire[3]["content"][0]["type"] == "image_url"
