"""A hosted observer (a FunctionModel named like OpenAI's) behind privacy: what it was sent for a
user message, and the observations kept; and the checks the prose-secret tests share, each on a
table of sentences (``said``: a sentence and the secret in it; ``ordinary``: sentences left alone)."""

from __future__ import annotations

from typing import Any

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.privacy import Redactor
from obsmem.models.testing import FunctionModel


def privacy_config() -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))


def echoing(seen: list[str]) -> FunctionModel:
    """A hosted observer (named like OpenAI's) that notes in ``seen`` what it was sent and keeps
    it as one observation (its last 3,000 characters)."""

    def observer(messages: list[Message], settings: Any) -> str:
        sent = "\n".join(m.text for m in messages)
        seen.append(sent)
        echoed = " ".join(sent.split())[-3000:]
        return f"<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User said: {echoed}\n</observations>"

    return FunctionModel(observer, name="openai:x")


async def observed(text: str) -> tuple[str, str]:
    """What the hosted observer was sent for a user message ``text``, and the observations kept."""
    seen: list[str] = []
    async with Memory("memory://", config=privacy_config(), observer=echoing(seen)) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 40)])
        await memory.observe("t1")
        kept = await memory.get_observations("t1")
    return "\n".join(seen), kept


async def check_never_sent(said: list[tuple[str, str]]) -> None:
    """None of the secrets of ``said`` (said in one user message) reaches the hosted observer or the
    observations kept."""
    text = "\n\n".join(sentence for sentence, _ in said) + "\n\n" + "word " * 40
    sent, kept = await observed(text)
    assert sent and "User said" in kept, "observed"
    assert [secret for _, secret in said if secret in sent] == []
    assert [secret for _, secret in said if secret in kept] == []


async def check_sent_as_written(ordinary: list[str]) -> None:
    """Every sentence of ``ordinary`` reaches the hosted observer as written, nothing redacted."""
    text = "\n\n".join(ordinary) + "\n\n" + "word " * 40
    sent, _ = await observed(text)
    sent = sent.replace("\n> ", "\n")  # the transcript quotes a message's next lines
    assert [line for line in ordinary if line not in sent] == []
    assert "[REDACTED" not in sent


def check_replaced_alone(
    text: str, secret: str, *, counts: dict[str, int] | None = None, before: str | None = None
) -> None:
    """``secret`` is replaced in ``text`` (one redaction, counted as ``counts`` unless None), the
    words before it stay (``before``: what they are, when not all of the text before the secret),
    and redacting again changes nothing."""
    redactor = Redactor(b"k" * 32)
    once = redactor.redact(text)
    assert secret not in once.text
    if counts is not None:
        assert once.counts == counts
    assert once.text.split("[REDACTED")[0] == (text.split(secret)[0] if before is None else before)
    assert redactor.redact(once.text).text == once.text


def check_left_alone(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text
