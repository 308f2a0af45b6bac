"""A secret under a key-like name in a tool call's arguments is redacted on its way to the observer.

Found by a hostile review: the redacting wrapper replaces whole values under key-like names
(``api_key``, ``token``, ``client_secret``) in structured tool-call arguments, but the LLM observer
renders tool calls into its transcript text (``{api_key: "letmein-now", …}``) before the wrapper
sees the request, and on text only the 16-character, high-entropy detectors applied. On main the
observer model received all three values in clear. Now a quoted value after a key-like name is a
secret in text too.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

VALUES = {"api_key": "letmein-now", "token": "blueberry-pancake", "client_secret": "opensesame"}


async def test_the_observer_never_sees_a_key_named_argument_in_clear() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.extend(m.text for m in messages)
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User logged in.\n</observations>"

    call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="login", args=dict(VALUES)),))
    config = MemoryConfig(observation={"message_tokens": 50, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        messages = [
            Message.user("log me in " + "x " * 60), call,
            Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="login", result="ok"),)),
            Message.assistant("done " + "y " * 60),
        ]
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=messages)
        await turn.end()
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "Tool Call login" in sent, "the observer saw the call"
    assert not [k for k, v in VALUES.items() if v in sent], sent


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('{api_key: "letmein-now"}', False),
        ('"client_secret": "opensesame"', False),
        ("token='blueberry-pancake'", False),
        ("max tokens: 4096", True),  # not quoted: a number, not a secret
        ('token: "${TOKEN}"', True),  # a template
        ('the "secret" of the recipe is "love"', True),  # no key-value assignment
    ],
)
def test_a_quoted_value_after_a_key_like_name(text: str, kept: bool) -> None:
    redacted = Redactor(b"k").redact(text).text
    value = text.rsplit('"', 2)[-2] if '"' in text else text.split("'")[1] if "'" in text else ""
    assert (redacted == text) is kept, redacted
    if not kept:
        assert value not in redacted
