"""Detect repetition loops in observer and reflector output.

Small models sometimes fall into a loop and emit the same text until they hit their output
limit. Committing that would inflate the observation log by tens of thousands of tokens and push
memory into endless reflection, so the observer regenerates once and then skips the cycle, and
the reflector treats it as a failed attempt. The check must therefore be *cheap* (it runs on
every model answer) and must not punish a faithful summary of genuinely repetitive input.

Three observations shape the rules:

* A loop repeats *content*: either a stretch of characters (a tight loop inside one line) or a
  block of lines (a long-period loop). About fifty sampled 200-char windows catch the first: a
  window counts as repeated when the same 200 characters occur anywhere else in the text. (The
  reference compared the samples only with each other, which misses every loop whose period
  aliases with the sampling step.) Exact duplicate lines catch the second.
* Faithful summaries of repetitive tool activity (a build thread of ``pnpm build → ok``, or two
  commands alternating a few hundred times) also repeat lines, but the repetition is a *short*
  line recurring at period one or two. Such lines are "explained" and left out of both rules.
  A short line is one under :data:`SHORT_LINE_CHARS` characters; anything longer that repeats,
  or any block of three or more lines that repeats, is still a loop.
* A single giant line is not a loop by itself: the parser truncates long lines (see
  ``om/llm/parsing.py``), so it cannot flood memory. Only what would be kept (each line clipped to
  :data:`LINE_CLIP_CHARS`) is judged.
"""

from __future__ import annotations

__all__ = [
    "LINE_CLIP_CHARS",
    "MIN_LENGTH",
    "SHORT_LINE_CHARS",
    "degeneracy_report",
    "is_degenerate",
]

MIN_LENGTH = 2000
"""Text shorter than this is never degenerate: a loop that short costs nothing."""

WINDOW_CHARS = 200
WINDOW_SAMPLES = 50
MIN_WINDOWS = 5
WINDOW_DUPLICATE_RATIO = 0.4

MIN_COUNTED_LINE_CHARS = 24
"""Lines shorter than this (trimmed) are ignored by the duplicate-line rule: bullets such as
``* ✅ done`` legitimately recur."""
MIN_COUNTED_LINES = 20
LINE_DUPLICATE_RATIO = 0.5

SHORT_LINE_CHARS = 80
"""A repeated line shorter than this, recurring at period 1 or 2, is read as faithful tool
output rather than a loop."""
EXPLAINED_MAX_PERIOD = 2

LINE_CLIP_CHARS = 10_000
"""Matches the parser's line cap: longer lines are truncated before they are committed."""


def is_degenerate(text: str) -> bool:
    """True when ``text`` looks like a model repetition loop (see the module docstring)."""
    return degeneracy_report(text) is not None


def degeneracy_report(text: str) -> str | None:
    """Why ``text`` is degenerate, as a short diagnostic, or None when it is not.

    The diagnostic names the rule and its numbers so a log line can tell a true loop from a
    false positive without storing the whole output.
    """
    if len(text) < MIN_LENGTH:
        return None
    suspect = _unexplained_lines(text)

    counted = [line for line in suspect if len(line) >= MIN_COUNTED_LINE_CHARS]
    if len(counted) >= MIN_COUNTED_LINES:
        duplicates = len(counted) - len(set(counted))
        if duplicates / len(counted) > LINE_DUPLICATE_RATIO:
            return f"duplicate lines: {duplicates} of {len(counted)} counted lines repeat"

    joined = "\n".join(line[:LINE_CLIP_CHARS] for line in suspect)
    if len(joined) >= MIN_LENGTH:
        starts = _window_starts(len(joined))
        if len(starts) > MIN_WINDOWS:
            duplicates = sum(_recurs(joined, start) for start in starts)
            if duplicates / len(starts) > WINDOW_DUPLICATE_RATIO:
                return f"duplicate windows: {duplicates} of {len(starts)} sampled windows recur"
    return None


def _unexplained_lines(text: str) -> list[str]:
    """The trimmed, non-blank lines, minus short lines that repeat at period one or two.

    A line is explained when it is short and equal to one of the previous two non-blank lines,
    which covers runs of one command's result and two commands alternating. The first
    occurrence always stays, so the text's real content is still judged.
    """
    kept: list[str] = []
    recent: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        explained = len(line) < SHORT_LINE_CHARS and line in recent
        recent.append(line)
        if len(recent) > EXPLAINED_MAX_PERIOD:
            recent.pop(0)
        if not explained:
            kept.append(line)
    return kept


def _window_starts(length: int) -> range:
    """About :data:`WINDOW_SAMPLES` evenly spaced starts of :data:`WINDOW_CHARS`-char windows."""
    step = max(1, length // WINDOW_SAMPLES)
    return range(0, length - WINDOW_CHARS + 1, step)


def _recurs(text: str, start: int) -> bool:
    """Whether the window at ``start`` also occurs at another position (overlaps allowed)."""
    window = text[start : start + WINDOW_CHARS]
    return text.find(window) != start or text.find(window, start + 1) != -1
