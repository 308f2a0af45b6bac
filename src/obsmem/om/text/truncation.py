"""Fitting previous observations into the observer's prompt budget (§6.3).

The observer is shown the observations it already made so it does not repeat them and can
update them. That text grows without bound, while the observer's prompt must not; so a *view* of
it is cut down to ``previousObserverTokens``. What survives is chosen for what the observer needs
most: the newest lines verbatim (what it is continuing from) and the older 🔴/✅ lines (facts
and completed actions it must not contradict or redo). Everything else collapses into
``[N observations truncated here]`` notices, so the observer knows something was left out.

Pure functions: the stored observations are never changed, only the returned view.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from obsmem.om.text.format import PRIORITY_DONE, PRIORITY_HIGH, is_boundary_line, parse_date_header, parse_line

__all__ = [
    "TRUNCATION_NOTICE",
    "TruncationResult",
    "replace_reflected_prefix",
    "truncate_previous_observations",
    "truncation_notice",
]

#: Matches a notice produced by :func:`truncation_notice`.
TRUNCATION_NOTICE: Final = re.compile(r"\[(\d+) observations? truncated here\]")

_IMPORTANT: Final = frozenset({PRIORITY_HIGH, PRIORITY_DONE})


def truncation_notice(count: int) -> str:
    """The line that stands in for ``count`` hidden observation lines."""
    return f"[{count} observation{'' if count == 1 else 's'} truncated here]"


@dataclass(frozen=True, slots=True)
class TruncationResult:
    """A budget-fitted view of observations.

    ``truncated`` is True when ``text`` differs from the input because content was dropped.
    ``hidden_lines`` counts the observation lines replaced by notices (or dropped entirely when
    the budget is zero).
    """

    text: str
    truncated: bool
    hidden_lines: int


def replace_reflected_prefix(text: str, buffered_reflection: str, line_count: int) -> str:
    """Show a buffered reflection in place of the lines it already condenses (§6.3 step 1).

    A reflection buffered in the background covers the first ``line_count`` lines (split on
    ``"\\n"``) of the observations as they were when it started; lines appended since then are
    kept after it. Showing both would make the observer see the same facts twice, and the
    reflection is much shorter. A blank reflection or a non-positive ``line_count`` replaces
    nothing; a ``line_count`` past the end replaces everything.
    """
    if line_count <= 0 or not buffered_reflection.strip():
        return text
    rest = "\n".join(text.split("\n")[line_count:]).strip("\n")
    reflection = buffered_reflection.strip("\n")
    return f"{reflection}\n\n{rest}" if rest.strip() else reflection


# --------------------------------------------------------------------------------------------
# Truncation
# --------------------------------------------------------------------------------------------

_BLANK, _HEADER, _BOUNDARY, _OBSERVATION = range(4)


class _Log:
    """Observation text split into typed lines, with the positions the search needs."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.kinds: list[int] = []
        important: list[int] = []
        count = 0
        for raw in self.lines:
            if not raw.strip():
                self.kinds.append(_BLANK)
            elif is_boundary_line(raw):
                self.kinds.append(_BOUNDARY)
            elif parse_date_header(raw) is not None:
                self.kinds.append(_HEADER)
            else:
                self.kinds.append(_OBSERVATION)
                parsed = parse_line(raw)
                if parsed is not None and parsed.priority in _IMPORTANT:
                    important.append(count)
                count += 1
        self.count = count  # observation lines
        self.important = important  # observation indices of 🔴/✅ lines, oldest first

    def important_in_tail(self, tail: int) -> int:
        return len(self.important) - bisect_left(self.important, self.count - tail)

    def min_tail(self, keep_important: int) -> int:
        """Smallest tail such that the older important lines kept are no more than the tail.

        With a tail of ``t`` lines, keeping the newest ``keep_important`` important lines means
        ``keep_important - important_in_tail(t)`` of them come from before the tail; that number
        may not exceed ``t``. ``t + important_in_tail(t)`` is increasing, so bisect on it.
        """
        low, high = 0, self.count
        while low < high:
            mid = (low + high) // 2
            if mid + self.important_in_tail(mid) >= keep_important:
                high = mid
            else:
                low = mid + 1
        return low

    def kept_mask(self, keep_important: int, tail: int) -> list[bool]:
        kept = [False] * self.count
        for index in range(self.count - tail, self.count):
            kept[index] = True
        if keep_important:
            for index in self.important[-keep_important:]:
                kept[index] = True
        return kept

    def render(self, kept: list[bool]) -> tuple[str, int]:
        """Render the kept lines with notices; returns the text and the number of hidden lines.

        Well-formedness rules:

        - A run of consecutive hidden observation lines (headers, blanks and boundaries between
          them do not break a run) becomes one notice, so each notice stands for exactly one
          run. It sits where the run starts: under the date header of its first hidden line,
          which dates the gap. A run of one line is shown as-is: the notice would cost about as
          much as the line and say less.
        - A ``Date:`` header is emitted iff something under it is shown (an observation line or
          the start of a hidden run), right before the first such item, after a blank line.
          So every visible line keeps the header it had.
        - A message-boundary line is emitted iff something is shown both before and after it;
          boundaries inside a hidden run are dropped with it.
        - Original blank lines are not copied; one blank line separates date groups and
          surrounds boundary lines, as in the canonical rendering of ``format.py``.
        """
        shown = list(kept)
        index = 0
        while index < self.count:  # single hidden lines are shown as-is
            if shown[index]:
                index += 1
                continue
            end = index
            while end < self.count and not shown[end]:
                end += 1
            if end - index == 1:
                shown[index] = True
            index = end

        out: list[str] = []
        hidden = run = 0
        pending_header: str | None = None
        pending_boundary: str | None = None

        def flush_pending() -> None:
            nonlocal pending_header, pending_boundary
            if pending_boundary is not None:
                if out:
                    _blank_line(out)
                    out.extend((pending_boundary, ""))
                pending_boundary = None
            if pending_header is not None:
                _blank_line(out)
                out.append(pending_header)
                pending_header = None

        observation = 0
        for kind, raw in zip(self.kinds, self.lines, strict=True):
            if kind == _HEADER:
                pending_header = raw
            elif kind == _BOUNDARY:
                pending_boundary, pending_header = raw, None
            elif kind == _OBSERVATION:
                if not shown[observation]:
                    if not run:
                        flush_pending()
                    pending_boundary = None  # a boundary inside a hidden run goes with it
                    run += 1
                    hidden += 1
                else:
                    if run:
                        out.append(truncation_notice(run))
                        run = 0
                    flush_pending()
                    out.append(raw)
                observation += 1
        if run:
            out.append(truncation_notice(run))
        return "\n".join(out), hidden


def _blank_line(out: list[str]) -> None:
    if out and out[-1]:
        out.append("")


def truncate_previous_observations(
    text: str, budget_tokens: int | None, count_tokens: Callable[[str], int]
) -> TruncationResult:
    """Cut ``text`` down to at most ``budget_tokens`` tokens for the observer's prompt (§6.3).

    - ``budget_tokens is None``: no truncation (the option is disabled).
    - ``budget_tokens <= 0``: nothing is shown.
    - Within budget: returned unchanged.
    - Over budget: a candidate keeps a *tail* of the ``t`` newest observation lines plus the
      newest ``k`` older 🔴/✅ lines, with ``k <= t`` so recency is never traded away entirely
      for importance. Hidden runs become notices (see :meth:`_Log.render` for the layout rules).
      The chosen candidate keeps the most important lines, then the longest tail, and its
      rendered text is verified with ``count_tokens`` against the budget.
    - If no candidate fits, the result is the notice for all lines alone (it may exceed a
      budget smaller than the notice itself; the observer must at least learn that there were
      observations).

    Search: keeping the newest ``I`` important lines needs a tail of at least ``t_min(I)``, and
    the cheapest such candidate grows with ``I``, so the largest fitting ``I`` is found by binary
    search; then, for that ``I``, the longest fitting tail likewise. Each probe renders and counts
    once, O(n), so the whole search is O(n log n). Token costs are assumed to grow with the kept
    set, which holds for real tokenizers up to notice-size noise; every returned candidate is
    verified, so that assumption can cost optimality but never the budget.
    """
    if budget_tokens is None:
        return TruncationResult(text=text, truncated=False, hidden_lines=0)
    log = _Log(text)
    if budget_tokens <= 0:
        return TruncationResult(text="", truncated=bool(text.strip()), hidden_lines=log.count)
    if count_tokens(text) <= budget_tokens:
        return TruncationResult(text=text, truncated=False, hidden_lines=0)
    if log.count == 0:  # only headers/boundaries: nothing worth a notice
        return TruncationResult(text="", truncated=True, hidden_lines=0)

    renders: dict[tuple[int, int], tuple[str, int] | None] = {}

    def fitting(keep_important: int, tail: int) -> tuple[str, int] | None:
        key = (keep_important, tail)
        if key not in renders:
            rendered = log.render(log.kept_mask(keep_important, tail))
            renders[key] = rendered if count_tokens(rendered[0]) <= budget_tokens else None
        return renders[key]

    best = fitting(0, 0)  # everything hidden: the cheapest candidate
    if best is None:
        return TruncationResult(text=truncation_notice(log.count), truncated=True, hidden_lines=log.count)

    low, high = 0, len(log.important)  # invariant: the candidate for ``low`` fits
    while low < high:
        mid = (low + high + 1) // 2
        if (probe := fitting(mid, log.min_tail(mid))) is not None:
            low, best = mid, probe
        else:
            high = mid - 1
    keep_important = low

    low, high = log.min_tail(keep_important), log.count  # the candidate for ``low`` is ``best``
    while low < high:
        mid = (low + high + 1) // 2
        if (probe := fitting(keep_important, mid)) is not None:
            low, best = mid, probe
        else:
            high = mid - 1
    return TruncationResult(text=best[0], truncated=True, hidden_lines=best[1])
