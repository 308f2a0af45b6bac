"""A pasted log waiting in the window, counted once, is not handed to a thread again at every
later boundary: since 6cd62ee ``context_from`` warms the window, and ``TokenCounter.warm`` sent
every long part of it to a worker thread at each call, counted or not (2 hand-offs a turn, each
recomputing the part's cost key). Counted by the warm's thread jobs, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio


async def test_a_counted_log_in_the_window_is_not_warmed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs: list[int] = []
    original = TokenCounter._warm_now

    def counted(self: TokenCounter, long: list[Any], unknown: list[Any]) -> None:
        jobs.append(len(long) + len(unknown))
        original(self, long, unknown)

    monkeypatch.setattr(TokenCounter, "_warm_now", counted)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=200_000))
    async with Memory(f"sqlite:///{tmp_path / 'o.db'}", config=config) as memory:
        turn = await memory.begin_turn(
            thread_id="t", resource_id="u", messages=[Message.user("log:\n" + "line of a log 12345\n" * 5000)]
        )
        await turn.step([Message.assistant("ok")])
        await turn.end()
        assert jobs  # the paste itself was counted off the loop
        jobs.clear()
        for i in range(5):
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(f"question {i}")])
            context = await turn.step([Message.assistant("ok")])
            await turn.end()
            assert context.messages[0].text.startswith("log:")  # the log is still in the window
        assert jobs == []
