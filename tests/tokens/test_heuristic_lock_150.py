"""The heuristic estimator (``TokenCounter(exact=False)``, and every counter where tiktoken cannot
be imported) reads text with one regex, and one step of it takes a whole word or run under the
interpreter lock: a pasted 2 MB DNA sequence, a padding of spaces or a ruler of "=" held the lock
(and a server's event loop, while Memory counted on a worker thread) for a quarter second, 3 s
for 10 MB. Checked without timing: the regex is watched and no step may read more than 64 K
characters. And the estimate of ordinary text is unchanged: the pieces it reads are cut where
the regex cannot join the two sides, so it finds the same words (checked with hypothesis)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem import tokens as tokens_module
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(observation=ObservationConfig(message_tokens=10_000_000, buffer_tokens=False))
MOST_CHARS = 65_536


class _WatchedPattern:
    """The heuristic's regex, noting the longest stretch of text one step of it read."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.longest = 0
        self.steps = 0

    def finditer(self, text: str, *args: Any) -> Any:
        last = 0
        for match in self.pattern.finditer(text, *args):
            self.steps += 1
            self.longest = max(self.longest, match.end() - last)
            last = match.end()
            yield match


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> _WatchedPattern:
    spy = _WatchedPattern(tokens_module._HEURISTIC_PIECE)
    monkeypatch.setattr(tokens_module, "_HEURISTIC_PIECE", spy)
    return spy


async def test_a_pasted_sequence_is_estimated_in_small_steps(watched: _WatchedPattern) -> None:
    sequence = "ACGT" * 500_000  # a 2 MB FASTA sequence without line breaks: one "word"
    beats = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal beats
        while not stop.is_set():
            beats += 1
            await asyncio.sleep(0)

    async with Memory("memory://", counter=TokenCounter(exact=False), config=QUIET) as memory:
        beating = asyncio.create_task(heartbeat())
        turn = await memory.begin_turn(
            thread_id="t", resource_id="u", messages=[Message.user("Align this:\n" + sequence)]
        )
        await turn.step([Message.assistant("Aligned.")])
        await turn.end()
        stop.set()
        await beating
        status = await memory.status("t")
    assert beats > 0 and watched.steps > 0
    assert watched.longest <= MOST_CHARS, f"one regex step read {watched.longest:,} characters under the lock"
    assert status.window_tokens > 500_000


@pytest.mark.parametrize(
    "text",
    [
        "abcdefghij" * 1_000_000,  # a 10 MB word
        " " * 2_000_000 + "end",  # padding
        "=" * 2_000_000,  # a ruler
        "ΑΒΓΔ" * 500_000,  # a run of Greek capitals
        "\ud83d\ude00" * 500_000,  # surrogate pairs, as JSON escapes decode them
    ],
)
def test_a_long_run_is_estimated_in_small_steps(watched: _WatchedPattern, text: str) -> None:
    counter = TokenCounter(exact=False, cache_size=0)
    first = counter.count_text(text)
    assert first == counter.count_text(text) > 0
    assert watched.longest <= MOST_CHARS, f"one regex step read {watched.longest:,} characters under the lock"


_ALPHABET = (
    list("aBzZéÉßǅʰ中ひカ한ไअ") + ["\u0915\u093f", "\u0301", "\u0903", "\u0964", "\u200d", "\ufe0f", "_", "__"]
    + list("0123456789") + ["٣", "²", "½", "Ⅻ"]
    + list("!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~") + list("’‘“”—…、。，．！？：；（）「」『』【】《》〈〉·")
    + [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u2028", "\u3000", "\x1c", "\x00", "\ud83d", "\ude00"]
    + ["🙂", "'s", "ABC", "abc", "a" * 30, "A" * 20, " " * 20, "." * 20]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET), max_size=80).map("".join), st.integers(min_value=1, max_value=6))
def test_the_pieces_give_the_same_words(text: str, size: int) -> None:
    """The regex finds the same words, in the same order, in the pieces as in the whole text (so
    the estimate, a sum in that order, is the same float)."""
    pattern = tokens_module._HEURISTIC_PIECE
    whole = [(m.lastgroup, m.group("prefix"), m.group()) for m in pattern.finditer(text)]
    pieces = tokens_module._pieces(text, size)
    cut = [(m.lastgroup, m.group("prefix"), m.group()) for piece in pieces for m in pattern.finditer(piece)]
    assert cut == whole, pieces


def test_ordinary_text_is_estimated_as_before() -> None:
    """Long ordinary texts (many pieces): the estimate is the one read in a single pass."""
    texts = [
        "The quick brown fox didn't jump; it's 2024-06-15 and 12345 foxes.\n" * 4_000,
        "日本語のテキスト、ünïcödé слова।  मराठी\u093f ไทย 한국어 🙂👩\u200d💻 " * 3_000,
        '{"id":12,"name":"Ada","tags":["x","y"],"blob":"QUJDRA=="},' * 5_000,
    ]
    counter = TokenCounter(exact=False, cache_size=0)
    for text in texts:
        total = 0.0
        for match in tokens_module._HEURISTIC_PIECE.finditer(text):
            kind = match.lastgroup
            if kind == "word":
                prefix = match.group("prefix")
                total += tokens_module._word_cost(match.group()[1:] if prefix else match.group(), prefix)
            elif kind == "punct":
                total += tokens_module._punct_cost(match.group())
            else:
                total += 1.0
        assert counter.count_text(text) == tokens_module._round_half_up(total)
