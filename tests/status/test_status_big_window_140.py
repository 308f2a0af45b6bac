"""``Memory.status`` with a pasted log waiting in the window counts it off the event loop.

Found by measuring (a heartbeat beside ``status``): with a 5 MB log unobserved (high thresholds, or
its observation still running), the first ``status`` a process asked for (a server replica, the
inspector, ``obsmem`` run again, a ``watch``) tokenized the whole log on the loop's thread: a gap
of 1.1-1.9 s. ``status`` now warms the token counter with the window (long texts counted in a
thread, as a turn does), so its counts are lookups.

And in that thread, deciding whether the log holds a whitespace run too long for tiktoken
(``_LONG_WHITESPACE``, a regex over the whole text in one call) held the interpreter lock about
0.3-0.4 s for 5 MB: the loop stood still all the same. The check now looks at one position per
100,000 characters and widens only whitespace found there. Both are checked by counting, not timing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem import tokens as tokens_module
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio

LINE = "2026-12-05 09:14:02 worker-3 GET /api/orders?id=12 -> 200 in 14 ms\n"
BIG = 1_000_000
QUIET = MemoryConfig(observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False))


async def test_status_counts_a_waiting_log_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    log = LINE * (BIG // len(LINE))
    async with Memory(url, config=QUIET) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Here is the log:")])
        await turn.step([Message.assistant("Send it.")])
        await turn.end()
        await memory.save_messages("t", [Message.user(log)])

    loop_thread = threading.get_ident()
    on_loop: list[int] = []
    original = TokenCounter.count_text

    def watched(self: TokenCounter, text: str | None) -> int:
        if text and len(text) >= 32_768 and threading.get_ident() == loop_thread:
            on_loop.append(len(text))
        return original(self, text)

    monkeypatch.setattr(TokenCounter, "count_text", watched)
    async with Memory(url, config=QUIET) as memory:  # another process: nothing counted yet
        status = await memory.status("t")
    assert status.unobserved_messages == 3 and status.window_tokens > BIG // 8, status
    assert on_loop == [], f"status counted {on_loop} characters on the event loop's thread"


class _Scans:
    """``_LONG_WHITESPACE`` as the counter sees it, noting how many characters each call may scan."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.scanned: list[int] = []

    def finditer(self, text: str, *args: Any) -> Any:
        self.scanned.append(len(text))
        return self.pattern.finditer(text, *args)

    def search(self, text: str, *args: Any) -> Any:
        self.scanned.append(len(text))
        return self.pattern.search(text, *args)


def test_a_long_log_is_not_scanned_whole_for_long_whitespace(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = _Scans(tokens_module._LONG_WHITESPACE)
    monkeypatch.setattr(tokens_module, "_LONG_WHITESPACE", scans)
    log = LINE * (BIG // len(LINE))
    assert tokens_module._count_o200k(log) == len(tokens_module.o200k_encoding().encode_ordinary(log))
    assert scans.scanned == [], f"the whole log was scanned for long whitespace: {scans.scanned}"


@pytest.mark.parametrize(
    "text",
    [
        "word " + " " * 100_000 + "word",  # exactly the slice: a long run
        "word " + " " * 99_998 + "word",  # one short of it, across a probe position
        ("a" + " " * 99_998) * 4,  # many runs just short of it, each over a probe position
        "x" * 99_999 + "\u3000" * 150_000 + "y",  # a long run of other whitespace, starting before a probe
        "\n" * 250_001,  # nothing but whitespace
        "z" * 300_000,  # none at all
    ],
)
def test_the_whitespace_check_agrees_with_the_pattern(text: str) -> None:
    expected = tokens_module._LONG_WHITESPACE.search(text) is not None
    assert tokens_module._has_long_whitespace(text) is expected
