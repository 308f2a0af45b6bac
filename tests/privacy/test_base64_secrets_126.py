"""A file a tool returns base64-encoded reaches the observer without the secrets inside it
(helper-126's hostile review).

GitHub's contents API (and many storage and mail APIs) return a file's bytes as base64 in a JSON
field: a coding agent that reads ``.env`` gets ``{"content": "T1BFTkFJX0FQSV9LRVk9c2st…",
"encoding": "base64"}``. A model decodes base64 as easily as it reads text, but the detectors saw
only the encoded letters: the file's API key and database password went to the hosted observer.
Now a base64 run whose decoded text holds a secret is replaced whole.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ENV = f"OPENAI_API_KEY={KEY}\nDATABASE_URL=postgres://app:Tr0ub4dor-3@db:5432/app\nDEBUG=false\n"


def _github_style(text: str) -> str:
    """Base64 in lines of 60 characters, as GitHub's contents API returns it."""
    encoded = base64.b64encode(text.encode()).decode()
    return "\n".join(encoded[i:i + 60] for i in range(0, len(encoded), 60)) + "\n"


async def test_a_base64_env_file_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User read the config.\n</observations>"

    content = _github_style(ENV)
    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        messages = [
            Message.user("what is in my .env? " + "x " * 30),
            Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="get_file",
                                                          args={"path": ".env"}),)),
            Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="get_file", result={
                "name": ".env", "encoding": "base64", "content": content}),)),
            Message.assistant("It sets three variables. " + "y " * 30),
        ]
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=messages)
        await turn.end()
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "Tool Result get_file" in sent and '"encoding": "base64"' in sent
    assert [line for line in content.splitlines() if line[:20] in sent] == []


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(b"just an ordinary paragraph of text, nothing secret in it at all").decode(),
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",  # image bytes
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
    ],
)
def test_base64_without_a_secret_inside_is_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


def test_a_single_line_base64_secret_is_replaced_and_idempotent() -> None:
    redactor = Redactor(b"k")
    encoded = base64.b64encode(f"token: {KEY}".encode()).decode()
    once = redactor.redact(f"blob {encoded} end")
    assert encoded[:20] not in once.text and once.text.startswith("blob [REDACTED:") and once.text.endswith(" end")
    assert redactor.redact(once.text).text == once.text


@pytest.mark.parametrize("unit", ["QUFB", "QUFBQUFB\n", "QUFB\\n", "c2stcHJvai1BYjNkRWY2aElq"])
def test_linear_on_long_base64(unit: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 20_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"
