"""Long texts are counted line by line with each line's count kept (observations are counted
again whenever a line is added): the sum over :func:`~obsmem.tokens._line_segments` must be the
o200k count of the whole text, exactly, for any text."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem import tokens
from obsmem.tokens import TokenCounter, _line_segments, o200k_encoding

# What o200k's pre-tokenizer treats differently: letters of each case and script, combining
# marks, digits, punctuation (alone it may take the newlines after it), "/", contractions,
# every kind of whitespace (Unicode's and Python's, which differ), emoji.
_ALPHABET = list("aBzé中ß") + ["\u0301", "\u0915", "\u093f"] + list("0123456789") + list(".,*-—:;!?()[]'’\"") + [
    "/", "'s", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u2028", "\u0085", "\x1c", "\u3000", "🙂",
    "Date: Jun 15, 2025", "* 🔴 (09:15) ", "\n* ", "\n/", "\n ", "</observations>", "<|endoftext|>",
]


def _count(text: str) -> int:
    return len(o200k_encoding().encode_ordinary(text))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET), max_size=120).map("".join))
def test_the_segments_make_the_text_and_its_count(text: str) -> None:
    segments = _line_segments(text)
    assert "".join(segments) == text
    assert sum(_count(s) for s in segments) == _count(text)


def test_a_long_text_is_counted_exactly_and_its_lines_are_kept() -> None:
    lines = [f"* 🟡 (09:{i % 60:02d}) line {i}: the invoice {i * 37} goes to Lisbon, pier {i % 9}." for i in range(200)]
    text = "Date: Jun 15, 2025\n" + "\n".join(lines)
    assert len(text) >= tokens._SEGMENTED_FROM
    counter = TokenCounter(exact=True)
    tokens._segment_counts.clear()
    assert counter.count_text(text) == _count(text)
    kept = len(tokens._segment_counts)
    assert kept > 150  # one per line
    longer = text + "\n* 🔴 (10:00) one more line"
    assert counter.count_text(longer) == _count(longer)
    assert len(tokens._segment_counts) == kept + 2  # only the new line and the old last one (now with its newline)
    edited = text.replace("line 7:", "line seven:")
    assert counter.count_text(edited) == _count(edited)


def test_the_kept_counts_stay_bounded() -> None:
    """The kept counts never pass their bound (the older half goes when full, the newest stay);
    a text of more segments than a quarter of it is counted in one call and keeps nothing, so one
    huge log never flushes what the observations keep; long segments are counted, not kept."""
    tokens._segment_counts.clear()
    counter = TokenCounter(exact=True)
    for n in range(12):
        text = "\n".join(f"line {n}-{i} " + "x" * (i % 50) for i in range(900))
        assert counter.count_text(text) == _count(text)
        assert len(tokens._segment_counts) <= tokens._SEGMENTS_KEPT
    newest = "line 11-899 " + "x" * (899 % 50)
    assert newest in tokens._segment_counts  # the newest survive a drop
    before = dict(tokens._segment_counts)
    huge = "\n".join(f"entry {i}" for i in range(tokens._SEGMENTS_PER_TEXT + 10))
    assert counter.count_text(huge) == _count(huge)
    assert tokens._segment_counts == before
    long_lines = "\n".join(["y " * 1_000, "z"] * 3)
    tokens._segment_counts.clear()
    assert counter.count_text(long_lines) == _count(long_lines)
    assert all(len(s) <= tokens._SEGMENT_MAX_CHARS for s in tokens._segment_counts)


def _texts() -> list[str]:
    """Real chat text: the bundled demo conversation, and the LoCoMo dev conversations where the
    data is present (``OBSMEM_LOCOMO`` or the shared data folder)."""
    demo = json.loads((Path(tokens.__file__).parent / "demo" / "conversation.json").read_text())
    texts = ["\n".join(_strings(demo))]
    for candidate in (os.environ.get("OBSMEM_LOCOMO"), Path(__file__).parents[3] / "shared/data/locomo/locomo-dev.json"):
        if candidate and Path(candidate).is_file():
            texts += ["\n".join(_strings(conversation)) for conversation in json.loads(Path(candidate).read_text())]
            break
    return texts


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_real_conversations_count_the_same() -> None:
    """Real chat text, in long blocks, counts the same line by line as whole."""
    texts = _texts()
    assert sum(len(t) for t in texts) > 20_000
    for text in texts:
        for start in range(0, min(len(text), 60_000), 5_000):
            block = text[start : start + 5_000]
            assert sum(_count(s) for s in _line_segments(block)) == _count(block)
