"""A large request is redacted off the event loop (privacy boundary on, a hosted observer).

Redaction reads the whole text with every secret detector, about 1 ms a KB (0.95 ms measured
on this machine): a 100 KB pasted document held the event loop ~95 ms while its observer
request was redacted. Checked deterministically: the
redactor's calls on large texts are watched, and none may run on the loop's thread.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor

pytestmark = pytest.mark.anyio

SENTENCE = "The deploy failed again at 09:14 because the migration on table orders timed out. "


async def test_a_large_observer_request_is_redacted_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    on_loop: list[int] = []
    seen: list[str] = []
    original = Redactor.redact

    def watched(self: Redactor, text: str) -> Any:
        if len(text) >= 20_000 and threading.get_ident() == loop_thread:
            on_loop.append(len(text))
        return original(self, text)

    monkeypatch.setattr(Redactor, "redact", watched)

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User shared a deploy log.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 500, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        text = SENTENCE * 400 + "The router config has password: hunter2-Blue"  # about 33 KB
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted.")])
        await memory.observe("t1")
    assert seen and "hunter2-Blue" not in "\n".join(seen)  # redacted, where it ran
    assert on_loop == [], f"redaction of {on_loop} characters ran on the event loop"
