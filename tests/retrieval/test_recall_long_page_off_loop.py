"""Recalling a page that holds a pasted log renders and counts it off the event loop: the
recall tool (``Memory.recall``, what the actor's tool call runs) counted a 5 MB message's text
on the loop's thread, about 10 MB of it in 3 counts (the rendered page, then the prefixes the
token budget cut it to), holding every other request of a server meanwhile (found by
helper-150). Counted by characters, not timed."""

from __future__ import annotations

import threading

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio

LINE = "2026-12-05 09:14:02 worker-3 GET /api/orders?id=12 -> 200 in 14 ms\n"


@pytest.mark.parametrize("detail", ["low", "high"])
async def test_a_long_page_is_counted_off_the_loop(detail: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = MemoryConfig(
        retrieval=True, observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False)
    )
    async with Memory("memory://", config=config) as memory:
        first = Message.user("Here is the log:\n" + LINE * 75_000)
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[first])
        await turn.step([Message.assistant("Got it.")])
        await turn.end()
        loop_thread = threading.get_ident()
        on_loop: list[int] = []
        original = TokenCounter.count_text

        def watched(self: TokenCounter, text: str) -> int:
            if text and threading.get_ident() == loop_thread:
                on_loop.append(len(text))
            return original(self, text)

        monkeypatch.setattr(TokenCounter, "count_text", watched)
        result = await memory.recall("t", cursor=first.id, detail=detail)
        assert result.messages[0].id == first.id  # the page was read
        assert result.truncated == (detail == "high")  # at high detail the budget cut the log
        assert sum(on_loop) < 100_000, (sum(on_loop), len(on_loop))
