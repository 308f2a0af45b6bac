"""The remind agent reads a long request off the event loop (helper-161).

Every turn that starts with a user message is searched for a reminder, and the request is
normalised (NFKC, look-alike letters, words) first: about a quarter of a second per megabyte
(0.74 s for a 3.2 MB pasted log), on the loop's thread, holding every other turn of the process;
``knowledge.remind_timeout_s`` cannot interrupt work the loop itself does. A long request is now
read on a worker thread (a short one where it is), and the reminder is the same.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import obsmem.knowledge.agents.remind as remind_module
from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False}, knowledge={"trust": "verified"})
LOG = "\n".join(f"2026-12-05 10:{i % 60:02d}:00 worker-{i} processed batch {i} without errors" for i in range(800))


def _watch(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    seen: list[tuple[int, bool]] = []
    loop_thread = threading.get_ident()
    original = remind_module._query_words

    def watched(text: str) -> Any:
        seen.append((len(text), threading.get_ident() == loop_thread))
        return original(text)

    monkeypatch.setattr(remind_module, "_query_words", watched)
    return seen


async def _reminder(memory: Memory, text: str) -> str:
    turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)])
    try:
        return "\n".join(m.text for m in turn.context.messages if m.metadata.get("obsmem") == "knowledge-reminder")
    finally:
        await turn.end()


async def test_a_long_request_is_read_off_the_loop_and_still_reminded(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _watch(monkeypatch)
    async with Knowledge.in_memory() as knowledge, Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
        user = await knowledge.node("User", "person", "org:default/resource:alice")
        await knowledge.append(user.id, "their phone number is +49 176 5550 3381", "org:default/resource:alice",
                               reason="said", attribute="phone number")
        long_request = f"Here is the log:\n{LOG}\nAnyway, what is my phone number again?"
        assert len(long_request) > 40_000
        reminded = await _reminder(memory, long_request)
        assert "5550 3381" in reminded
        assert seen and all(not on_loop for size, on_loop in seen if size >= 16_384), seen
        seen.clear()
        await _reminder(memory, "What is my phone number again?")
        assert seen and all(on_loop for _, on_loop in seen), seen
