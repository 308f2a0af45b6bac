"""A pasted 5 MB log is counted on a worker thread, but one tokenizer call holds the interpreter
lock while it reads its text and while it hands its tokens back (a Python list of a million ints),
so the event loop (every other user's turn in a server) stood still 20-140 ms in that one call.

Checked without timing: the tokenizer is watched (the o200k encoding the counter uses, wrapped),
and each call's text and the token list it builds under the lock must stay small; and the log is
read once in the turn, not again and again. The count stays tiktoken's count of the whole text.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem import tokens as tokens_module
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio

LINE = "2026-12-05 09:14:02 worker-3 GET /api/orders?id=12&user=ada -> 200 in 14 ms, cache miss\n"
QUIET = MemoryConfig(observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False))
MOST_CHARS = 65_536  # what one call may read under the lock (a few hundred microseconds' worth)


class _WatchedEncoding:
    """The o200k encoding, noting each call: its text's length, the size of the token list it
    returned (0 for a numpy array: one buffer, no Python int per token) and the thread."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.calls: list[tuple[int, int, int]] = []

    def _note(self, text: str, result: Any) -> Any:
        built = len(result) if isinstance(result, list) else 0
        self.calls.append((len(text), built, threading.get_ident()))
        return result

    def encode_ordinary(self, text: str) -> Any:
        return self._note(text, self._encoding.encode_ordinary(text))

    def encode(self, text: str, **kwargs: Any) -> Any:
        return self._note(text, self._encoding.encode(text, **kwargs))

    def encode_to_numpy(self, text: str, **kwargs: Any) -> Any:
        return self._note(text, self._encoding.encode_to_numpy(text, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoding, name)


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> _WatchedEncoding:
    real = tokens_module.o200k_encoding()
    spy = _WatchedEncoding(real)
    monkeypatch.setattr(tokens_module, "_encoding", spy)
    return spy


async def test_a_pasted_log_is_tokenized_in_small_pieces(watched: _WatchedEncoding) -> None:
    log = LINE * (5_000_000 // len(LINE))
    beats = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:  # another user's turn, wanting the loop meanwhile
        nonlocal beats
        while not stop.is_set():
            beats += 1
            await asyncio.sleep(0)

    async with Memory("memory://", config=QUIET) as memory:
        beating = asyncio.create_task(heartbeat())
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(log)])
        await turn.step([Message.assistant("Read it.")])
        await turn.end()
        stop.set()
        await beating
        status = await memory.status("t")

    assert beats > 0
    calls = watched.calls
    assert calls, "the log was not tokenized"
    read = sum(chars for chars, _, _ in calls)
    largest = max(chars for chars, _, _ in calls)
    built = max(tokens for _, tokens, _ in calls)
    assert largest <= MOST_CHARS, f"one tokenizer call read {largest:,} characters under the lock"
    assert built <= MOST_CHARS, f"one tokenizer call built a list of {built:,} tokens under the lock"
    assert read <= len(log) * 1.1, f"the turn tokenized {read:,} characters for a log of {len(log):,}"
    assert status.window_tokens >= len(tokens_module.o200k_encoding().encode_ordinary(log))


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox didn't jump over the lazy dog. " * 200_000,  # prose, 10 MB
        "QUJDRA+/" * 1_000_000,  # base64 without line breaks
        "日本語のテキスト、漢字。" * 400_000,  # CJK without spaces
        '{"id":12,"tags":["x","y"]},' * 300_000,  # minified JSON
    ],
)
def test_a_long_text_is_tokenized_in_small_pieces(watched: _WatchedEncoding, text: str) -> None:
    counter = TokenCounter(exact=True, cache_size=0)
    expected = len(watched._encoding.encode_ordinary(text))
    assert counter.count_text(text) == expected
    largest = max(chars for chars, _, _ in watched.calls)
    assert largest <= MOST_CHARS, f"one tokenizer call read {largest:,} characters under the lock"
    assert sum(chars for chars, _, _ in watched.calls) == len(text)


def test_a_long_word_builds_no_token_list(watched: _WatchedEncoding) -> None:
    """A text with nowhere to cut (one 1 MB word) is one call: its tokens come back as one
    buffer, not as a Python list of a million ints built under the lock."""
    word = "".join(random.Random(150).choices("abcdefghijklmnopqrstuvwxyz", k=1_000_000))
    counter = TokenCounter(exact=True, cache_size=0)
    first = counter.count_text(word)
    assert first == counter.count_text(word) == len(watched._encoding.encode_ordinary(word)) > 250_000
    built = max(tokens for _, tokens, _ in watched.calls)
    assert built <= MOST_CHARS, f"one tokenizer call built a list of {built:,} tokens under the lock"
