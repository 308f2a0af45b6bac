"""Detect repetition loops in observer and reflector output.

Small models sometimes fall into a loop and emit the same text until they hit their output
limit. Committing that would inflate the observation log by tens of thousands of tokens and push
memory into endless reflection, so the observer regenerates once and then skips the cycle, and
the reflector treats it as a failed attempt. The check must therefore be *cheap* (it runs on
every model answer) and must not punish a faithful summary of genuinely repetitive input.

Four observations shape the rules:

* A loop repeats *content*: either a stretch of characters (a tight loop inside one line) or a
  block of lines (a long-period loop). About fifty sampled 200-char windows catch the first: a
  window counts as repeated when the same 200 characters occur anywhere else in the text. (The
  reference compared the samples only with each other, which misses every loop whose period
  aliases with the sampling step.) Duplicate lines catch the second: more than half of at
  least :data:`MIN_COUNTED_LINES` lines repeat. Lines are compared as *near-duplicates*: the
  same words after the list marker, the priority emoji and the ``(HH:MM)`` time, in the same
  date group, ignoring case and spacing; so a loop that counts the minutes up is still a loop.
* Faithful summaries of repetitive tool activity (a build thread of ``pnpm build → ok``, or two
  commands alternating a few hundred times) also repeat lines, but the repetition is a *short*
  line recurring at period one or two. Such lines are "explained" and left out of both rules.
  A short line is one under :data:`SHORT_LINE_CHARS` characters; anything longer that repeats,
  or any block of three or more lines that repeats, is still a loop.
* Two things are never explained, because no faithful summary produces them. A dated
  observation (a 🔴/🟡/🟢 line, or any line with an ``(HH:MM)`` time) written again word for
  word under the same date and time is one event stated twice: a copy, however short. And a
  faithful summary repeats a line at most once per line of what it summarises: when the caller
  says how long its input was (``input_lines``: the observer's transcript, the reflector's
  observation log), explained repeats beyond that many are a loop too.
* A single giant line is not a loop by itself: the parser truncates long lines (see
  ``om/llm/parsing.py``), so it cannot flood memory. Only what would be kept (each line clipped to
  :data:`LINE_CLIP_CHARS`) is judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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

# What a near-duplicate may differ in: the list marker, the priority emoji, the time.
_LINE_HEAD = re.compile(r"^(?:(?:[-*•]|\d{1,3}[.)])\s+)?(?P<prio>🔴|🟡|🟢|✅)?\s*(?P<time>\(\d{1,2}:\d{2}\))?\s*")
_DATED_PRIORITIES = ("🔴", "🟡", "🟢")


def is_degenerate(text: str, *, input_lines: int | None = None) -> bool:
    """True when ``text`` looks like a model repetition loop (see the module docstring)."""
    return degeneracy_report(text, input_lines=input_lines) is not None


def degeneracy_report(text: str, *, input_lines: int | None = None) -> str | None:
    """Why ``text`` is degenerate, as a short diagnostic, or None when it is not.

    ``input_lines`` is the number of non-blank lines of the input ``text`` was written from,
    when the caller knows it: repeats beyond it cannot be explained as a faithful summary.
    The diagnostic names the rule and its numbers so a log line can tell a true loop from a
    false positive without storing the whole output.
    """
    if len(text) < MIN_LENGTH:
        return None
    suspect = _unexplained_lines(text, input_lines)

    counted = [line for line in suspect if len(line.text) >= MIN_COUNTED_LINE_CHARS]
    if len(counted) >= MIN_COUNTED_LINES:
        duplicates = len(counted) - len({line.key for line in counted})
        if duplicates / len(counted) > LINE_DUPLICATE_RATIO:
            return f"duplicate lines: {duplicates} of {len(counted)} counted lines repeat"

    joined = "\n".join(line.text[:LINE_CLIP_CHARS] for line in suspect)
    if len(joined) >= MIN_LENGTH:
        starts = _window_starts(len(joined))
        if len(starts) > MIN_WINDOWS:
            duplicates = sum(_recurs(joined, start) for start in starts)
            if duplicates / len(starts) > WINDOW_DUPLICATE_RATIO:
                return f"duplicate windows: {duplicates} of {len(starts)} sampled windows recur"
    return None


@dataclass(frozen=True, slots=True)
class _Line:
    text: str  # trimmed
    key: str  # near-duplicate identity: date group and the words without marker, priority, time
    exact: str  # copy identity: date group and the whole line
    dated: bool  # a 🔴/🟡/🟢 line or one with an (HH:MM) time: it states one event


def _lines(text: str) -> list[_Line]:
    """The trimmed, non-blank lines with their identities."""
    lines: list[_Line] = []
    group = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Date:"):
            group = line
        head = _LINE_HEAD.match(line)
        assert head is not None  # every part of the pattern is optional
        words = " ".join(line[head.end() :].casefold().split())
        dated = head.group("time") is not None or head.group("prio") in _DATED_PRIORITIES
        lines.append(_Line(line, f"{group}\n{words}", f"{group}\n{line}", dated))
    return lines


def _unexplained_lines(text: str, input_lines: int | None) -> list[_Line]:
    """The lines, minus short lines that repeat at period one or two.

    A line is explained when it is short and a near-duplicate of one of the previous two
    lines, which covers runs of one command's result and two commands alternating; except a
    dated line that copies one of them exactly, and except once ``input_lines`` repeats have
    been explained. The first occurrence always stays, so the text's real content is still
    judged.
    """
    kept: list[_Line] = []
    recent: list[_Line] = []
    explained_count = 0
    for line in _lines(text):
        explained = (
            len(line.text) < SHORT_LINE_CHARS
            and any(line.key == before.key for before in recent)
            and not (line.dated and any(line.exact == before.exact for before in recent))
            and (input_lines is None or explained_count < input_lines)
        )
        recent.append(line)
        if len(recent) > EXPLAINED_MAX_PERIOD:
            recent.pop(0)
        if explained:
            explained_count += 1
        else:
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
