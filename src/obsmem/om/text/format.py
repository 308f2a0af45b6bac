"""The observation text format, as data: date groups of prioritised, timed lines.

Observations are text because the actor reads them, but every part of obsmem that edits them
(the offline observer and reflector, context rendering, truncation) works on this structure, so
the format is defined once. Pure functions only; no I/O.

::

    Date: Jun 15, 2025
    * 🔴 (14:30) User stated they moved to Berlin (changing from Munich).
      * -> follow-up detail
    * ✅ (14:41) Assistant booked the flight for Friday (meaning Jun 20, 2025).

    --- message boundary (2025-06-15T14:42:00+00:00) ---
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime

__all__ = [
    "PRIORITY_DONE",
    "PRIORITY_HIGH",
    "PRIORITY_LOW",
    "PRIORITY_MEDIUM",
    "DateGroup",
    "ObservationLine",
    "append_with_boundary",
    "boundary_line",
    "format_date_header",
    "is_boundary_line",
    "parse_date_header",
    "parse_observations",
    "render_observations",
    "split_on_boundaries",
]

PRIORITY_HIGH = "🔴"
PRIORITY_MEDIUM = "🟡"
PRIORITY_LOW = "🟢"
PRIORITY_DONE = "✅"
PRIORITIES = (PRIORITY_HIGH, PRIORITY_MEDIUM, PRIORITY_LOW, PRIORITY_DONE)

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DATE_HEADER = re.compile(r"^\s*Date:\s*([A-Z][a-z]{2,8})\.?\s+(\d{1,2}),?\s+(\d{4})\b.*$")
_LINE = re.compile(
    r"^(?P<indent>\s*)[*\-]\s+(?P<prio>🔴|🟡|🟢|✅)?\s*(?:\((?P<time>\d{1,2}:\d{2})\)\s*)?(?P<text>.*)$"
)
_BOUNDARY = re.compile(r"^\s*--- message boundary \((?P<at>[^)]*)\) ---\s*$")


@dataclass(frozen=True, slots=True)
class ObservationLine:
    """One bullet. ``indent`` > 0 marks a child of the previous top-level line."""

    text: str
    priority: str | None = None
    time: str | None = None  # "HH:MM", 24-hour
    indent: int = 0

    def render(self) -> str:
        pieces = ["  " * self.indent + "*"]
        if self.priority:
            pieces.append(self.priority)
        if self.time:
            pieces.append(f"({self.time})")
        pieces.append(self.text)
        return " ".join(pieces)


@dataclass(slots=True)
class DateGroup:
    """A ``Date:`` header and its lines. ``day`` is None for lines before any header."""

    day: date | None
    lines: list[ObservationLine] = field(default_factory=list)
    header_suffix: str = ""  # e.g. " (2 days ago)" added by context annotation

    def render(self) -> str:
        head = [format_date_header(self.day) + self.header_suffix] if self.day else []
        return "\n".join(head + [line.render() for line in self.lines])


def format_date_header(day: date) -> str:
    return f"Date: {_MONTHS[day.month - 1]} {day.day}, {day.year}"


def parse_date_header(line: str) -> date | None:
    match = _DATE_HEADER.match(line)
    if not match:
        return None
    month_name, day_s, year_s = match.groups()
    key = month_name[:3].title()
    if key not in _MONTHS:
        return None
    try:
        return date(int(year_s), _MONTHS.index(key) + 1, int(day_s))
    except ValueError:
        return None


def boundary_line(at: datetime) -> str:
    return f"--- message boundary ({at.isoformat()}) ---"


def is_boundary_line(line: str) -> bool:
    return bool(_BOUNDARY.match(line))


def parse_line(raw: str) -> ObservationLine | None:
    """Parse one bullet line; None for blank lines, headers and boundaries."""
    if not raw.strip() or is_boundary_line(raw) or parse_date_header(raw):
        return None
    match = _LINE.match(raw)
    if not match:
        return ObservationLine(text=raw.strip())
    indent = len(match["indent"].expandtabs(2)) // 2
    return ObservationLine(
        text=match["text"].strip(), priority=match["prio"], time=match["time"], indent=min(indent, 4)
    )


def parse_observations(text: str) -> list[DateGroup]:
    """Parse observation text into date groups, tolerantly.

    Unknown lines become plain lines rather than being dropped: memory is never silently lost
    to a parse. Repeated headers for the same day are merged into one group.
    """
    groups: list[DateGroup] = []
    by_day: dict[date, DateGroup] = {}
    current: DateGroup | None = None
    for raw in text.splitlines():
        day = parse_date_header(raw)
        if day is not None:
            current = by_day.get(day)
            if current is None:
                current = DateGroup(day=day)
                by_day[day] = current
                groups.append(current)
            continue
        line = parse_line(raw)
        if line is None:
            continue
        if current is None:
            current = DateGroup(day=None)
            groups.append(current)
        current.lines.append(line)
    return groups


def render_observations(groups: list[DateGroup]) -> str:
    return "\n\n".join(g.render() for g in groups if g.lines)


def split_on_boundaries(text: str) -> list[str]:
    """Split rendered observations into chunks at message-boundary lines (dropped)."""
    chunks: list[str] = []
    current: list[str] = []
    for raw in text.splitlines():
        if is_boundary_line(raw):
            chunk = "\n".join(current).strip()
            if chunk:
                chunks.append(chunk)
            current = []
        else:
            current.append(raw)
    chunk = "\n".join(current).strip()
    if chunk:
        chunks.append(chunk)
    return chunks


def append_with_boundary(active: str, new: str, at: datetime) -> str:
    """Append a cycle's observations after a boundary line (none when ``active`` is empty)."""
    new = new.strip()
    if not new:
        return active
    if not active.strip():
        return new
    return f"{active.rstrip()}\n\n{boundary_line(at)}\n\n{new}"


def with_priority(line: ObservationLine, priority: str | None) -> ObservationLine:
    return replace(line, priority=priority)
