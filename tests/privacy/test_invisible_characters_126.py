"""Secrets with invisible characters inside reach the observer only as placeholders
(helper-126's hostile review).

A key copied from a web page, a chat app or a PDF often carries invisible characters: a zero-width
space or a soft hyphen where the page allowed a line break, a byte-order mark, a word joiner. The
model reads straight through them (and a human copying the key back out of a transcript gets the
key), but every detector stopped at them: ``sk-proj-…\\u200b…`` matched nothing, so the key went
to the hosted observer in clear.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor

pytestmark = pytest.mark.anyio

INVISIBLE = "\u200b\u2060\ufeff\u00ad"
SECRETS = {
    "openai_key": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
}


def _hidden(value: str, n: int) -> str:
    middle = len(value) // 2
    return value[:middle] + INVISIBLE[n % len(INVISIBLE)] + value[middle:]


def _visible(text: str) -> str:
    return "".join(ch for ch in text if ch not in INVISIBLE and ch not in "\u200c\u200d")


async def test_a_key_with_an_invisible_character_inside_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User shared keys.\n</observations>"

    text = "my keys: " + ", ".join(_hidden(v, n) for n, v in enumerate(SECRETS.values())) + " and the ZWJ one " \
        + SECRETS["openai_key"][:20] + "\u200d" + SECRETS["openai_key"][20:] + ". " + "word " * 40
    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 30)])
        await memory.observe("t1")
    assert seen, "observed"
    sent = _visible("\n".join(seen))
    assert [name for name, value in SECRETS.items() if value in sent] == []


@pytest.mark.parametrize(
    "text",
    [
        "family: 👨\u200d👩\u200d👧 at home",  # an emoji sequence keeps its joiners
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: the non-joiner is spelling
        "नमस्\u200dते",
    ],
)
def test_joiners_that_are_spelling_are_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


def test_linear_on_runs_of_invisible_characters() -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    for unit in ("a\u200b", "\u200b" * 7 + "sk-", "a\u200db\u200c"):
        ratio = growth(Redactor(b"k").redact, lambda n, u=unit: u * max(1, n // len(u)), 10_000)
        assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"


def test_a_text_with_nothing_to_replace_comes_back_as_given() -> None:
    """Callers read an unchanged text as "nothing found" (the structured rule then replaces a
    value under a key like ``password`` whole): invisible characters alone change nothing."""
    text = "hunter\u200b2 and a soft\u00adhyphen"
    assert Redactor(b"k").redact(text).text == text
