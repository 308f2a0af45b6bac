"""The rare-word extractive baseline: the cheapest "memory" a harness should beat.

Split every message into sentences, strip stopwords, score each sentence by how rare its words
are in the conversation (the sum of 1/count over its distinct content words), and keep the
best-scoring sentences that fit the token budget, shown in order under their ``Date:`` headers.
No model, no rules about people or plans: if obsmem's observations score no better than this at
the same budget, they are not earning their place.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import date

from obsmem.bench.normalize import STOPWORDS
from obsmem.om.text.format import format_date_header
from obsmem.tokens import TokenCounter
from obsmem.types import Message

__all__ = ["rare_word_context"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")


def _content(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence) if w.lower().strip("'’") not in STOPWORDS]


def rare_word_context(messages: Sequence[Message], budget: int, counter: TokenCounter) -> tuple[Message, ...]:
    """One system message of the rarest-word sentences of ``messages`` that fits ``budget`` tokens."""
    sentences: list[tuple[int, date, list[str]]] = []
    for message in messages:
        for piece in _SENTENCE.split(message.text):
            words = _content(piece)
            if words:
                sentences.append((len(sentences), message.created_at.date(), words))
    counts = Counter(w.lower() for _, _, words in sentences for w in set(words))
    ranked = sorted(sentences, key=lambda s: -sum(1 / counts[w.lower()] for w in set(s[2])))
    chosen: list[tuple[int, date, list[str]]] = []
    used = 0
    for sentence in ranked:
        cost = counter.count_text(" ".join(sentence[2])) + 3
        if used + cost <= budget:
            chosen.append(sentence)
            used += cost
    # Headers and the message frame cost too: drop the weakest sentence until the whole fits.
    while chosen:
        context = Message.system(_render(chosen))
        if counter.count_messages([context]) <= budget:
            return (context,)
        chosen.pop()
    return ()


def _render(chosen: list[tuple[int, date, list[str]]]) -> str:
    lines: list[str] = []
    last: date | None = None
    for _, day, words in sorted(chosen):
        if day != last:
            lines.append(format_date_header(day))
            last = day
        lines.append("* " + " ".join(words))
    return "\n".join(lines)
