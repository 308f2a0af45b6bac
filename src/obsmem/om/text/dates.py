"""Time words for observations: relative dates, gap phrases, loose date parsing, context rendering.

The actor reads its memory as text. Absolute dates alone are a poor signal for a model ("did the
trip on May 30 already happen?"), so just before observations are shown they are annotated with
relative phrases computed against *now*: every dated event ("(meaning May 30, 2023 - 2 weeks
ago)"), the newest date header (the reader's anchor for "now") and the headers of the last
:data:`RECENT_HEADER_DAYS` days ("yesterday", "3 days ago"). Older headers stay absolute: with
the anchor a model places them, and a phrase on each of them cost tokens on every call and
changed every day (so did the "[3 weeks later]" lines the original put between headers, which the
headers' own dates make redundant: they are no longer written). The stored text is never
annotated: the annotation goes stale every day, and a byte-stable store keeps prompt caching and
diffs meaningful.

Everything here is pure: no I/O and no clock reads. ``now``/``today`` are always parameters so the
functions are deterministic and table-testable. Every transform is line-based and uses regexes
that cannot backtrack across the whole input, so the cost is linear in the text length; memory
texts reach hundreds of thousands of lines.

Order for actor context (see :func:`prepare_observations_for_context`): first
:func:`optimize_for_context` (drop noise), then :func:`annotate_observations` (add time words).
The optimizer nevertheless leaves gap lines alone, so applying the two in the other order, or
twice, does not lose the gap lines.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Final

from obsmem.om.text.format import is_boundary_line, parse_date_header

__all__ = [
    "annotate_observations",
    "gap_text",
    "is_gap_line",
    "optimize_for_context",
    "parse_loose_date",
    "prepare_observations_for_context",
    "relative_day_phrase",
    "strip_thread_tags",
]

# --------------------------------------------------------------------------------------------
# Relative day phrases
# --------------------------------------------------------------------------------------------

#: Cut-offs, in whole days, for :func:`relative_day_phrase`. Below ``WEEK_FROM`` days are counted,
#: below ``MONTH_FROM`` weeks (``days // 7``), below ``YEAR_FROM`` months (``days // 30``, so
#: 360-364 days reads "12 months"), from ``YEAR_FROM`` on years (``days // 365``).
WEEK_FROM: Final = 7
MONTH_FROM: Final = 30
YEAR_FROM: Final = 365


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _span_words(days: int) -> str:
    """``days`` (>= 2) as "N days" / "1 week" / "N weeks" / "1 month" / "N months" / "N years"."""
    if days < WEEK_FROM:
        return _plural(days, "day")
    if days < MONTH_FROM:
        return _plural(days // 7, "week")
    if days < YEAR_FROM:
        return _plural(days // 30, "month")
    return _plural(days // 365, "year")


def relative_day_phrase(target: date, today: date) -> str:
    """Describe ``target`` relative to ``today`` in the words the actor sees.

    Calendar days only (time of day is ignored): "today", "yesterday"/"tomorrow", then
    "N days ago"/"in N days" for 2-6 days, "1 week"/"N weeks" for 7-29 days (floor of days / 7),
    "1 month"/"N months" for 30-364 days (floor of days / 30), "1 year"/"N years" from 365 days
    (floor of days / 365). Flooring means a phrase never overstates how long ago something was.
    """
    days = (today - target).days
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days == -1:
        return "tomorrow"
    if days > 0:
        return f"{_span_words(days)} ago"
    return f"in {_span_words(-days)}"


# --------------------------------------------------------------------------------------------
# Temporal-gap text (§4.4)
# --------------------------------------------------------------------------------------------

_MINUTE = 60
_GAP_UNITS: Final[tuple[tuple[str, int], ...]] = (
    ("year", 365 * 24 * 60 * _MINUTE),
    ("month", 30 * 24 * 60 * _MINUTE),
    ("week", 7 * 24 * 60 * _MINUTE),
    ("day", 24 * 60 * _MINUTE),
    ("hour", 60 * _MINUTE),
    ("minute", _MINUTE),
)
#: Gaps shorter than this are ordinary conversational pauses and get no marker.
GAP_THRESHOLD: Final = timedelta(minutes=10)


def gap_text(delta: timedelta) -> str | None:
    """The phrase for a pause of ``delta`` between two messages, or None when it is not worth one.

    None under 10 minutes (and for negative deltas: clocks that went backwards are not pauses).
    Under an hour: "N minute(s) later". Otherwise the largest unit that fits plus the next smaller
    unit, e.g. "3 days 4 hours later" or "1 year 3 months later" (month = 30 days, year = 365
    days); a zero second unit is dropped ("2 hours later"). Two units is enough precision for a
    model to reason about elapsed time without reading noise like seconds. Seconds are floored.
    """
    if delta < GAP_THRESHOLD:
        return None
    seconds = int(delta.total_seconds())
    for index, (unit, size) in enumerate(_GAP_UNITS):
        if seconds < size:
            continue
        major = seconds // size
        words = _plural(major, unit)
        if index + 1 < len(_GAP_UNITS):
            minor_unit, minor_size = _GAP_UNITS[index + 1]
            minor = (seconds - major * size) // minor_size
            if minor:
                words += " " + _plural(minor, minor_unit)
        return f"{words} later"
    return None  # pragma: no cover - unreachable: delta >= 10 minutes always matches "minute"


# --------------------------------------------------------------------------------------------
# Loose date parsing
# --------------------------------------------------------------------------------------------

_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTH_BY_NAME: dict[str, int] = {}
for _number, _name in enumerate(_MONTH_NAMES, start=1):
    _MONTH_BY_NAME[_name] = _number
    _MONTH_BY_NAME[_name[:3]] = _number
_MONTH_BY_NAME["sept"] = 9

_MONTH = r"(?:" + "|".join(sorted(_MONTH_BY_NAME, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|sday|rsday|urday)?\.?,?\s+"
_ORDINAL = r"(?:st|nd|rd|th)?"
_PART_DAY: Final = {"early": 7, "mid": 15, "late": 23}

_ISO_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_MONTH_DAY_YEAR = re.compile(
    rf"(?:{_WEEKDAY})?(?P<month>{_MONTH})\s+(?P<day>\d{{1,2}}){_ORDINAL}"
    rf"(?:\s*[-–]\s*\d{{1,2}}{_ORDINAL})?,?\s+(?P<year>\d{{4}})",
    re.IGNORECASE,
)
_DAY_MONTH_YEAR = re.compile(
    rf"(?:{_WEEKDAY})?(?P<day>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?(?P<month>{_MONTH}),?\s+(?P<year>\d{{4}})",
    re.IGNORECASE,
)
_PART_OF_MONTH = re.compile(
    rf"(?P<part>early|mid|late)[\s-]+(?P<month>{_MONTH}),?\s+(?P<year>\d{{4}})", re.IGNORECASE
)
_MONTH_RANGE = re.compile(
    rf"(?P<first>{_MONTH})\s*(?:to|through|until|-|–)\s*(?P<second>{_MONTH}),?\s+(?P<year>\d{{4}})",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"(?P<month>{_MONTH}),?\s+(?P<year>\d{{4}})", re.IGNORECASE)


def _month_number(name: str) -> int:
    return _MONTH_BY_NAME[name.lower().rstrip(".")]


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def parse_loose_date(text: str) -> date | None:
    """Parse the date forms observers write, or return None.

    Accepted (the whole string must be a date; month names full or abbreviated, any case):

    - ``2023-05-30``
    - ``May 30, 2023``, ``May 30 2023``, ``May 30th, 2023``, ``Friday, May 30, 2023``, ``30 May 2023``
    - ``May 27-28, 2023`` -> the first day of the range
    - ``early May 2023`` / ``mid May 2023`` / ``late May 2023`` -> the 7th / 15th / 23rd
    - ``April to May 2023`` -> the 1st of the first month (the [MAIN] behaviour); when the first
      month comes after the second ("November to February 2024") it is taken from the year before
    - ``May 2023`` -> the 1st

    A year is required: without one the date is ambiguous and annotating it would mislead.
    Impossible dates ("Feb 30, 2023") return None rather than raising.
    """
    text = text.strip().rstrip(".").strip()
    if match := _ISO_DATE.fullmatch(text):
        return _safe_date(int(match[1]), int(match[2]), int(match[3]))
    if match := _MONTH_DAY_YEAR.fullmatch(text) or _DAY_MONTH_YEAR.fullmatch(text):
        return _safe_date(int(match["year"]), _month_number(match["month"]), int(match["day"]))
    if match := _PART_OF_MONTH.fullmatch(text):
        day = _PART_DAY[match["part"].lower()]
        return _safe_date(int(match["year"]), _month_number(match["month"]), day)
    if match := _MONTH_RANGE.fullmatch(text):
        first, second = _month_number(match["first"]), _month_number(match["second"])
        year = int(match["year"])
        return _safe_date(year - 1 if first > second else year, first, 1)
    if match := _MONTH_YEAR.fullmatch(text):
        return _safe_date(int(match["year"]), _month_number(match["month"]), 1)
    return None


# --------------------------------------------------------------------------------------------
# Annotation for the actor's context (§5.2 step 2)
# --------------------------------------------------------------------------------------------

_UNITS = r"(?:days?|weeks?|months?|years?)"
_RELATIVE = rf"(?:today|yesterday|tomorrow|\d+ {_UNITS} ago|in \d+ {_UNITS})"
_LIKELY_DONE = ", likely already happened"

# ``(meaning <date>)`` or an already annotated ``(meaning <date> - <relative>[, likely ...])``.
# The date part cannot contain parentheses, so each "(" starts at most one scan that stops at the
# next parenthesis: linear per line.
_MEANING = re.compile(
    rf"\((?P<kw>meaning|estimated)\s+(?P<date>[^()]*?)"
    rf"(?:\s+-\s+{_RELATIVE}(?:{re.escape(_LIKELY_DONE)})?)?\)"
)
_FUTURE_INTENT = re.compile(
    r"\b(?:will|plan(?:s|ning)? to|looking forward to|going to|intends? to|wants? to|needs? to|about to)\b",
    re.IGNORECASE,
)
#: Date headers this many days old or newer keep a relative phrase (besides the newest one).
RECENT_HEADER_DAYS: Final = 14

_HEADER_PARTS = re.compile(r"(?P<head>\s*Date:\s*[A-Za-z]+\.?\s+\d{1,2},?\s+\d{4})(?P<rest>.*)")
_HEADER_ANNOTATION = re.compile(rf"\s*\({_RELATIVE}\)\s*")
_GAP_LINE = re.compile(r"\[(?:\d+ days|1 week|\d+ weeks|1 month|\d+ months) later\]")


def is_gap_line(line: str) -> bool:
    """True for a date-gap line such as ``[3 days later]`` (as inserted by the annotation)."""
    return _GAP_LINE.fullmatch(line.strip()) is not None


def _annotate_meaning(line: str, today: date) -> str:
    if "(meaning" not in line and "(estimated" not in line:
        return line
    future_intent: bool | None = None  # computed lazily, once per line

    def replace(match: re.Match[str]) -> str:
        nonlocal future_intent
        date_text = match["date"].strip()
        target = parse_loose_date(date_text)
        if target is None:  # not a date we understand (every accepted form carries a year)
            return match[0]
        note = f"{date_text} - {relative_day_phrase(target, today)}"
        if target < today:
            if future_intent is None:
                future_intent = _FUTURE_INTENT.search(line) is not None
            if future_intent:
                note += _LIKELY_DONE
        return f"({match['kw']} {note})"

    return _MEANING.sub(replace, line)


def _annotate_header(line: str, day: date, today: date, *, relative: bool = True) -> str:
    """Append (or refresh) the relative phrase of a date header, or with ``relative`` False
    remove one; unknown suffixes are left alone."""
    match = _HEADER_PARTS.fullmatch(line)
    if match is None:
        return line
    rest = match["rest"]
    if rest.strip() and not _HEADER_ANNOTATION.fullmatch(rest):
        return line
    return f"{match['head']} ({relative_day_phrase(day, today)})" if relative else match["head"]


def _drop_trailing_gap_line(out: list[str]) -> None:
    """Remove a gap line (and the blank lines after it) that ends ``out``, if there is one.

    Called before every date header, so gap lines from an earlier annotation are regenerated
    instead of doubled. Amortised O(1): each output line is popped at most once.
    """
    blanks = 0
    while blanks < len(out) and not out[-1 - blanks].strip():
        blanks += 1
    if blanks < len(out) and is_gap_line(out[-1 - blanks]):
        del out[len(out) - 1 - blanks :]


def annotate_observations(text: str, now: datetime) -> str:
    """Add relative-time words to observation text for the actor's context.

    ``now`` is interpreted in its own timezone: ``now.date()`` is "today".

    1. ``(meaning <date with year>)`` / ``(estimated <date with year>)`` becomes
       ``(meaning <date> - <relative>)``; when the date is past and the line shows future intent
       ("will", "plans to", "going to", ...) ``, likely already happened`` is added, because a
       plan whose date has passed is usually done and the model should not treat it as pending.
    2. The newest ``Date: Mon D, YYYY`` header, and every header of the last
       :data:`RECENT_HEADER_DAYS` days, gets `` (<relative>)`` appended; older headers stay
       absolute (see the module docstring).

    Safe to re-apply: existing annotations are recognised and refreshed against the new ``now``
    (or removed from a header that is no longer recent), never doubled; a gap line an earlier
    version wrote before a header is dropped. Message-boundary lines pass through untouched.
    Linear in the text length.
    """
    today = now.date()
    lines = text.split("\n")
    days = [None if is_boundary_line(line) else parse_date_header(line) for line in lines]
    newest = max((day for day in days if day is not None), default=None)
    recent = today - timedelta(days=RECENT_HEADER_DAYS)
    out: list[str] = []
    for line, day in zip(lines, days, strict=True):
        if day is None:
            out.append(line if is_boundary_line(line) else _annotate_meaning(line, today))
            continue
        _drop_trailing_gap_line(out)
        out.append(_annotate_header(line, day, today, relative=day == newest or day >= recent))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Optimisation for the actor's context (§5.2 step 1)
# --------------------------------------------------------------------------------------------

_ANCHOR = re.compile(r"\[O\d+(?:-N\d+)*\]")
_SPACES = re.compile(r" {2,}")
_BLANK_RUN = re.compile(r"\n{3,}")


def _optimize_line(line: str) -> str:
    if is_boundary_line(line) or is_gap_line(line):
        return line
    line = _ANCHOR.sub("", line)
    line = line.replace("🟡", "").replace("🟢", "")
    line = line.replace("->", " ")
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    return indent + _SPACES.sub(" ", body).rstrip()


def optimize_for_context(text: str) -> str:
    """Strip what costs the actor tokens without telling it anything.

    - ephemeral anchor ids ``[O12]`` / ``[O12-N3]`` (they only mean something to the reflector)
    - the 🟡 and 🟢 priority marks; 🔴 and ✅ stay because they change how the actor should act
    - ``->`` arrows become a space
    - runs of spaces collapse to one (leading indentation is kept: it encodes child lines),
      trailing spaces go, and 3+ newlines collapse to one blank line.

    Every other bracketed text stays as observed: ids, ticket numbers and lists (``[A-123]``,
    ``[1, 2, 3]``) are content. Message-boundary lines pass through untouched. Linear in the
    text length.
    """
    optimized = "\n".join(_optimize_line(line) for line in text.split("\n"))
    return _BLANK_RUN.sub("\n\n", optimized).strip("\n")


def prepare_observations_for_context(text: str, now: datetime) -> str:
    """The actor-facing observation text: :func:`optimize_for_context`, then annotation.

    Optimising first means the annotation's own additions are never inspected by the optimizer.
    """
    return annotate_observations(optimize_for_context(text), now)


# --------------------------------------------------------------------------------------------
# Thread wrapper tags
# --------------------------------------------------------------------------------------------

# "[^<>]*" cannot run past the next "<", so an input full of unterminated "<thread" openings is
# still scanned in linear time (a "[^>]*" here would be quadratic on such input).
_THREAD_TAG = re.compile(r"<thread(?:\s[^<>]*)?>|</thread\s*>", re.IGNORECASE)


def strip_thread_tags(text: str) -> str:
    """Remove ``<thread id="...">`` / ``</thread>`` wrappers, keeping what they wrap.

    Resource-scoped observers wrap each thread's observations in these tags; the actor's context
    does not need them. Attribute quoting and case do not matter; ``<threads>`` or other tags are
    not touched. Surrounding whitespace of the result is trimmed. Linear time.
    """
    return _THREAD_TAG.sub("", text).strip()
