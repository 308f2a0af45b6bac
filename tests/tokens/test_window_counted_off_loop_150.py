"""A process's first turn on a thread reads the window from the store, and the turn's context (built
while its save reaches the disk) counted every message of it on the event loop's thread: a 2 MB
paste waiting in the window (its observation not due yet) in one call, or 150 file reads of 30,000
characters (each under the size a counter warms off the loop) one after the other, 4.5 MB in one
stretch. Every other turn of the process (a server replica after a restart) waited meanwhile.
Checked by counting, not timing: the characters counted on the loop's thread."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio

LINE = "2026-12-05 09:14:02 worker-3 GET /api/orders?id=12 -> 200 in 14 ms\n"
QUIET = MemoryConfig(observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False))


@pytest.mark.parametrize(("count", "size"), [(1, 2_000_000), (150, 30_000)])
async def test_a_fresh_process_counts_the_window_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, size: int
) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    async with Memory(url, config=QUIET) as memory:
        first = [Message.user("Files follow.")]
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=first)
        await turn.end()
        for number in range(count):
            await memory.save_messages("t", [Message.user(f"file {number}:\n" + LINE * (size // len(LINE)))])

    loop_thread = threading.get_ident()
    on_loop: list[int] = []
    original = TokenCounter.count_text

    def watched(self: TokenCounter, text: str | None) -> int:
        if text and threading.get_ident() == loop_thread:
            on_loop.append(len(text))
        return original(self, text)

    monkeypatch.setattr(TokenCounter, "count_text", watched)
    async with Memory(url, config=QUIET) as memory:  # another process: nothing counted yet
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("And?")])
        await turn.step([Message.assistant("All read.")])
        await turn.end()
        status = await memory.status("t")
    assert status.window_tokens > count * size // 8, status
    counted = sum(on_loop)
    assert counted < 32_768, f"{counted:,} characters counted on the loop's thread ({len(on_loop)} texts)"
