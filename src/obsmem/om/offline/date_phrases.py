"""Date phrases in what people say, resolved to the day they mean: "(meaning Jun 20, 2025)".

The offline observer appends these notes to its lines; the actor's context later adds "2 days
ago"-style words to them (:mod:`obsmem.om.text.dates`). A wrong note is worse than none: it
states a false date with the authority of memory. So every rule here resolves only what it can
read one way, and leaves the rest as the words the person used. Pure functions of their
arguments, English-only regular-expression heuristics.

Date rules (see :func:`resolve_dates`), all relative to the message's local date:

* ``tomorrow`` / ``yesterday`` / ``the day after tomorrow`` / ``N days ago`` / ``in N days`` give
  an exact ``(meaning Mon D, YYYY)``; weeks, months and years counted that way are approximate
  and give ``(estimated …)``.
* ``next <weekday>`` is that weekday **in the next calendar week** (weeks start on Monday): on
  Wednesday 2025-06-18 "next Friday" is Jun 27, on Sunday 2025-06-15 it is Jun 20. People who
  mean the coming Friday usually say "on Friday" or "this Friday", which give the coming
  occurrence (Jun 20 from that Wednesday). ``last <weekday>`` mirrors it (previous calendar week).
* A bare weekday is the coming occurrence, or the most recent past one when its clause is in
  the past tense ("on Monday I went …", "since Monday"); a clause without tense words of its
  own takes the sentence's, unless it is in the present ("we moved it, it is now on Friday").
  The date a thing was moved, pushed, postponed or rescheduled to (or from) is ahead, whatever
  the verb's tense ("the release moved to Friday", said on a Monday, is that week's Friday).
* No single day, no note: "on a Friday", "every Friday", "on Fridays", "on Tuesday evenings",
  "the Friday after the launch", and a future reported from the past ("I told her I would come
  on Friday"). Nor when a calendar date named nearby (in the message or the few before it) puts
  the weekday in another week: "dinner on Saturday, March 22 … lunch on Sunday", said on March
  11, may mean Mar 16 or Mar 23; a nearby date that agrees with the plain reading keeps it.
* ``next/last week`` → ``(meaning week of <Monday>)``; ``this/next/last weekend`` →
  ``(meaning weekend of <Saturday>)``; ``next/last month`` → ``(meaning Jul 2025)``.
* Month names and "June 20"-style dates without a year are resolved only when their clause
  shows tense (future → next occurrence, past → last occurrence). A year is never invented for
  a birthday, anniversary, birth, death or wedding unless it is still to come ("I was born on
  March 14", "my birthday is June 20" stay as they are; "we're celebrating her birthday on June
  20" is this year's), nor for yearly dates ("every year on June 13"). Dates with an explicit
  year are already absolute.
* An explicit calendar date wins over a weekday next to it ("March 21, Friday morning",
  "the Saturday evening, March 22" get one note, for the date); "effective/as of/since March 1st"
  already applies, so it is the past occurrence.
* Vague words ("recently", "soon", "a few days ago", "today") are never annotated.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from obsmem.om.offline.patterns import (
    AGO,
    CLAUSE_EDGE,
    DAY_MONTH,
    FUTURE,
    IN_N,
    MONTH_DAY,
    MONTH_ONLY,
    NOT_ONE_WEEKDAY,
    PAST,
    PERIOD,
    PRESENT,
    RECURRING_DATE,
    RELATIVE_DAY,
    REPORTED,
    RESCHEDULE,
    RESCHEDULED_TO,
    UNSPECIFIC_WEEKDAY,
    WEEKDAY,
    YEARLY,
)

__all__ = ["MONTHS", "DateRef", "format_day", "named_dates", "resolve_dates", "weighed_dates"]

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip


def format_day(day: date) -> str:
    return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def _format_month(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


@dataclass(frozen=True, slots=True)
class DateRef:
    """A resolved time reference: where it is in the text and its annotation text."""

    start: int
    end: int
    note: str  # "meaning Jun 20, 2025" / "estimated May 2025"


def _tense(text: str) -> str | None:
    if FUTURE.search(text):
        return "future"
    if PAST.search(text):
        return "past"
    return None


#: How far back a phrase's left context is read for the words that modify it ("on a", "since",
#: "moved it to the"): far more than any of them needs, and it keeps every date phrase's work
#: bounded, so reading a text stays linear in its length.
_LOOKBACK = 200


class _Reading:
    """What every date phrase of one text asks about it, computed once per text.

    Reading a text takes time linear in its length: clause edges are found in one pass and
    each clause's tense is worked out once (a text that is one long clause full of weekdays
    asks it thousands of times), and whole-text questions are answered once.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.tense = _tense(text)
        self._edge_starts: list[int] | None = None
        self._edge_ends: list[int] = []
        first = RESCHEDULE.search(text)
        self._reschedule_end = first.end() if first else None
        self._past: bool | None = None
        self._yearly: bool | None = None
        self._recurring: bool | None = None
        self._clauses: dict[tuple[int, int], tuple[bool, str | None, bool]] = {}

    def has_past(self) -> bool:
        if self._past is None:
            self._past = PAST.search(self.text) is not None
        return self._past

    def without_year(self, tense: str | None) -> bool:
        """Whether a yearless date in the text must stay yearless: it recurs every year, or it
        is a birthday, anniversary, birth, death or wedding not spoken of as still to come ("I
        was born on March 14", "my birthday is June 20"; but "we're celebrating her birthday on
        June 20")."""
        if self._yearly is None:
            self._yearly = YEARLY.search(self.text) is not None
        if self._yearly:
            return True
        if tense == "future":
            return False
        if self._recurring is None:
            self._recurring = RECURRING_DATE.search(self.text) is not None
        return self._recurring

    def clause(self, start: int, end: int) -> tuple[bool, str | None, bool]:
        """(reported, tense, present) of the clause that holds ``text[start:end]`` (bounded by
        commas, "and", …): whether it reports a future ("would"), its own tense, and whether
        it is in the present."""
        if self._edge_starts is None:
            edges = list(CLAUSE_EDGE.finditer(self.text))
            self._edge_starts = [e.start() for e in edges]
            self._edge_ends = [e.end() for e in edges]
        index = bisect_right(self._edge_ends, start)  # edges that end at or before ``start``
        left = self._edge_ends[index - 1] if index else 0
        after = bisect_left(self._edge_starts, end)  # the first edge that starts at or after ``end``
        right = self._edge_starts[after] if after < len(self._edge_starts) else len(self.text)
        known = self._clauses.get((left, right))
        if known is None:
            clause = self.text[left:right]
            known = (REPORTED.search(clause) is not None, _tense(clause), PRESENT.search(clause) is not None)
            self._clauses[(left, right)] = known
        return known

    def tense_at(self, start: int, end: int) -> str | None:
        """The tense a date phrase at ``text[start:end]`` is used in.

        "future" or "past"; None for the present or no tense at all; "unsure" for a future
        reported from the past ("I told her I would come on Friday": said when?). A date after
        "moved/pushed/postponed/rescheduled … to/until/for/from" is a new date, so it lies ahead
        even in a past-tense sentence. Otherwise the clause decides; a clause without tense
        words of its own takes the sentence's ("On Friday, we went hiking"), unless it is in
        the present.
        """
        if (
            self._reschedule_end is not None
            and self._reschedule_end <= start
            and RESCHEDULED_TO.search(self.text, max(0, start - _LOOKBACK), start)
        ):
            return "future"
        reported, tense, present = self.clause(start, end)
        if reported and self.has_past():
            return "unsure"
        if tense is None and not present:
            tense = self.tense
        return tense

    def before(self, pattern: re.Pattern[str], start: int) -> bool:
        """Whether ``pattern`` (anchored with ``$``) matches the text just before ``start``."""
        return pattern.search(self.text, max(0, start - _LOOKBACK), start) is not None


def _month_number(name: str) -> int:
    return MONTHS.index(name[:3].title()) + 1


def _count(raw: str) -> int:
    return int(raw) if raw.isdigit() else _NUMBER_WORDS[raw.lower()]


def _shift_months(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _counted(n: int, unit: str, anchor: date, sign: int) -> str:
    if unit == "day":
        return f"meaning {format_day(anchor + timedelta(days=sign * n))}"
    if unit == "week":
        return f"estimated {format_day(anchor + timedelta(days=sign * 7 * n))}"
    if unit == "month":
        return f"estimated {_format_month(*_shift_months(anchor, sign * n))}"
    return f"estimated {anchor.year + sign * n}"


def _weekday(mod: str | None, wd: int, anchor: date, tense: str | None) -> date | None:
    monday = anchor - timedelta(days=anchor.weekday())
    mod = (mod or "").lower()
    if mod == "next":
        return monday + timedelta(days=7 + wd)
    if mod == "last":
        return monday + timedelta(days=wd - 7)
    ahead = (wd - anchor.weekday()) % 7
    if mod == "this":
        return anchor + timedelta(days=ahead)
    if "coming" in mod:
        return anchor + timedelta(days=ahead or 7)
    if tense == "unsure":
        return None
    if tense == "past":
        return anchor - timedelta(days=(anchor.weekday() - wd) % 7 or 7)
    return anchor + timedelta(days=ahead or 7)


#: How far a calendar date named nearby may lie from the message for its week to compete with
#: the plain reading of a bare weekday: from a week away (nearer ones share that reading's week)
#: to a year (a birth date decades back says nothing about which Friday is meant).
_OTHER_WEEK_DAYS = (7, 366)


def _named_for_another_week(when: date, anchor: date, nearby: Sequence[date]) -> bool:
    """True when a calendar date named nearby puts a bare weekday in another week than ``when``.

    "Saturday evening, March 22 … the party is lunch on Sunday", said on March 11: the Sunday
    may be the coming one (Mar 16) or the one after March 22 (Mar 23), so it is not resolved.
    Each named date stands for the occurrence of the weekday nearest to it; the plain reading
    stands when one of them agrees with it ("Friday 14 March" said three turns earlier).
    """
    low, high = _OTHER_WEEK_DAYS
    others = False
    for named in nearby:
        distance = abs((named - anchor).days)
        if distance > high:
            continue
        nearest = named + timedelta(days=(when.weekday() - named.weekday() + 3) % 7 - 3)
        if nearest == when:
            return False
        others = others or distance >= low
    return others


def weighed_dates(days: Iterable[date], anchor: date) -> list[date]:
    """The distinct ``days`` near enough to ``anchor`` to weigh against a bare weekday.

    :func:`_named_for_another_week` asks only whether some such day exists, so this is all of
    ``context`` that :func:`resolve_dates` needs, and at most a few hundred days however many
    dates the messages name (a pasted calendar must not make every sentence read them all).
    """
    high = _OTHER_WEEK_DAYS[1]
    return list(dict.fromkeys(d for d in days if abs((d - anchor).days) <= high))


def _period(mod: str, unit: str, anchor: date) -> str | None:
    monday = anchor - timedelta(days=anchor.weekday())
    step = {"next": 1, "last": -1, "this": 0}[mod]
    if unit == "week":
        return None if step == 0 else f"meaning week of {format_day(monday + timedelta(days=7 * step))}"
    if unit == "weekend":
        return f"meaning weekend of {format_day(monday + timedelta(days=5 + 7 * step))}"
    if step == 0:
        return None
    if unit == "month":
        return f"meaning {_format_month(*_shift_months(anchor, step))}"
    return f"meaning {anchor.year + step}"


def _calendar(month: int, day: int | None, anchor: date, tense: str | None, mod: str) -> str | None:
    if mod in ("next",):
        tense = "future"
    elif mod in ("last", "since"):
        tense = "past"
    elif mod == "this":
        tense = tense or "future"
    if tense not in ("future", "past"):
        return None
    year = anchor.year
    if day is None:
        if tense == "future" and month < anchor.month:
            year += 1
        elif tense == "past" and month > anchor.month:
            year -= 1
        if mod == "next" and month == anchor.month:
            year += 1
        return f"meaning {_format_month(year, month)}"
    try:
        when = date(year, month, day)
        if tense == "future" and when < anchor:
            when = date(year + 1, month, day)
        elif tense == "past" and when > anchor:
            when = date(year - 1, month, day)
    except ValueError:
        return None
    return f"meaning {format_day(when)}"


_MONTH_NAME = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b"


_ORDINAL_BEFORE = re.compile(r"\d(?:st|nd|rd|th)?,?\s*$")
_SINCE_BEFORE = re.compile(r"\bsince\s+$", re.I)
_ALREADY_BEFORE = re.compile(r"\b(?:effective|as of|since)\s+$")
_WD = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
#: "Tuesday to Sunday", "Mon–Fri", "between Monday and Thursday": a span of every week, no one day.
_RANGE_AFTER = re.compile(rf"\s*(?:to|through|thru|till|until|-|–|—)\s*{_WD}\b", re.I)
_RANGE_BEFORE = re.compile(
    rf"\b(?:{_WD}\s*(?:to|through|thru|till|until|-|–|—)|between(?:\s+{_WD}\s+and)?)\s*$", re.I
)
#: "from 7am to 3pm Tuesday": opening hours, every week.
_HOURS_BEFORE = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)?\s*(?:to|-|–)\s*\d{1,2}(?::\d{2})?\s*(?:am|pm)?\s*$", re.I)
_MOVED_BEFORE = re.compile(r"\b(?:mov|push|postpon|reschedul|shift|chang|switch|bump|swapp?)\w*\b", re.I)
#: "a week from Tuesday", "two weeks from Friday": counted from the coming occurrence.
_WEEKS_FROM_BEFORE = re.compile(r"\b(?P<n>a|one|two|three|\d)\s+weeks?\s+from\s+$", re.I)
#: "next week on Wednesday" / "on Wednesday next week": that weekday of the next calendar week.
NEXT_WEEK_ON = re.compile(
    rf"\bnext\s+week\s+on\s+(?P<wd>{_WD})\b|\b(?:on\s+)?(?P<wd2>{_WD})\s+next\s+week\b", re.I
)
_DATE_AFTER = re.compile(
    rf",?\s*(?:(?:morning|afternoon|evening|night),?\s*)?(?:the\s+)?(?:\d|{_MONTH_NAME})"
)


def _date_before(text: str, end: int) -> bool:
    """True when ``text[:end]`` ends with an explicit calendar date ("… March 21, ")."""
    tail = text[max(0, end - 24) : end]
    return any(m.end() >= len(tail.rstrip(", ")) for p in (MONTH_DAY, DAY_MONTH) for m in p.finditer(tail))


def named_dates(text: str, anchor: date) -> list[date]:
    """The calendar days ``text`` names ("March 22", "22 March 2025"), in text order.

    What a nearby bare weekday is weighed against (see :func:`resolve_dates`). A yearless day is
    taken in the year that puts it nearest to ``anchor``; a recurring one ("my birthday is June
    20") names no particular day and is left out, as are impossible ones ("Feb 30").
    """
    return _named_dates(_Reading(text), anchor)


def _named_dates(reading: _Reading, anchor: date) -> list[date]:
    days: list[tuple[int, date]] = []
    for m in (m for p in (MONTH_DAY, DAY_MONTH) for m in p.finditer(reading.text)):
        if not m["y"] and reading.without_year(reading.tense_at(m.start(), m.end())):
            continue
        month, day = _month_number(m["mon"]), int(m["d"])
        years = (int(m["y"]),) if m["y"] else (anchor.year - 1, anchor.year, anchor.year + 1)
        candidates = [d for y in years if (d := _safe_day(y, month, day)) is not None]
        if candidates:
            days.append((m.start(), min(candidates, key=lambda d: abs((d - anchor).days))))
    return [d for _, d in sorted(days)]


def _safe_day(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def resolve_dates(text: str, anchor: date, context: Sequence[date] = ()) -> list[DateRef]:
    """Find resolvable time references in ``text`` and resolve them against ``anchor``.

    ``context`` holds the calendar days named around ``text`` (the rest of its message and the
    messages just before, see :func:`named_dates`); a bare weekday is left unresolved when one
    of them, or one in ``text``, lies in another week than its plain reading. Returns the
    references in text order; overlapping matches keep the earliest pattern in the table.
    """
    reading = _Reading(text)
    nearby = [*context, *_named_dates(reading, anchor)]
    refs: list[DateRef] = []
    taken = bytearray(len(text))  # the characters a reference already covers
    other_week: dict[date, bool] = {}

    def add(start: int, end: int, note: str | None) -> None:
        if note and not any(taken[start:end]):
            refs.append(DateRef(start, end, note))
            taken[start:end] = b"\x01" * (end - start)

    for m in RELATIVE_DAY.finditer(text):
        offset = {"the day after tomorrow": 2, "the day before yesterday": -2, "tomorrow": 1}
        days = offset.get(m["w"].lower(), -1)
        add(m.start(), m.end(), f"meaning {format_day(anchor + timedelta(days=days))}")
    for m in AGO.finditer(text):
        add(m.start(), m.end(), _counted(_count(m["n"]), m["unit"].lower(), anchor, -1))
    for m in IN_N.finditer(text):
        add(m.start(), m.end(), _counted(_count(m["n"]), m["unit"].lower(), anchor, 1))
    for m in NEXT_WEEK_ON.finditer(text):  # one day, before "next week" alone claims the words
        when = _weekday("next", _WEEKDAYS.index((m["wd"] or m["wd2"]).lower()), anchor, None)
        add(m.start(), m.end(), f"meaning {format_day(when)}" if when else None)
    for m in PERIOD.finditer(text):
        add(m.start(), m.end(), _period(m["mod"].lower(), m["unit"].lower(), anchor))
    for m in WEEKDAY.finditer(text):
        if any(taken[m.start() : m.end()]):
            continue
        if _DATE_AFTER.match(text, m.end(), m.end() + 24):
            continue  # "Saturday, June 21", "Saturday evening, March 22": the explicit date says it
        moved = _MOVED_BEFORE.search(text, max(0, m.start() - 60), m.start())  # "moved from X to Y"
        if not moved and (_RANGE_AFTER.match(text, m.end()) or reading.before(_RANGE_BEFORE, m.start())
                          or reading.before(_HOURS_BEFORE, m.start())):  # fmt: skip
            continue  # "Tuesday to Sunday", "7am to 3pm Tuesday": every week, no one day
        if (weeks := _WEEKS_FROM_BEFORE.search(text, max(0, m.start() - 30), m.start())) and m["mod"] is None:
            wd = _WEEKDAYS.index(m["wd"].lower())
            if wd != anchor.weekday():  # said on that weekday it could mean either week: left as said
                count = _count(weeks["n"]) if not weeks["n"].isdigit() else int(weeks["n"])
                coming = anchor + timedelta(days=(wd - anchor.weekday()) % 7)
                add(weeks.start(), m.end(), f"meaning {format_day(coming + timedelta(days=7 * count))}")
            taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
            continue
        if reading.before(_ORDINAL_BEFORE, m.start()) and _date_before(text, m.start()):
            continue  # "March 21, Friday morning"
        mod = (m["mod"] or "").lower()
        bare = mod in ("", "on")
        if bare and (reading.before(UNSPECIFIC_WEEKDAY, m.start()) or NOT_ONE_WEEKDAY.match(text, m.end())):
            continue  # "on a Friday", "every Friday", "the Friday after the launch": no one day
        used: str | None = "past"  # "sick since Monday"
        if not (bare and reading.before(_SINCE_BEFORE, m.start())):
            used = reading.tense_at(m.start(), m.end())
        when = _weekday(mod, _WEEKDAYS.index(m["wd"].lower()), anchor, used)
        if when is not None and bare and when not in other_week:
            other_week[when] = _named_for_another_week(when, anchor, nearby)
        if when is None or (bare and other_week[when]):
            continue
        add(m.start(), m.end(), f"meaning {format_day(when)}")
    for pattern in (MONTH_DAY, DAY_MONTH):
        for m in pattern.finditer(text):
            used = reading.tense_at(m.start(), m.end())
            if m["y"] or reading.without_year(used):  # already absolute, or no year to give it
                continue
            before = text[max(0, m.start() - 12) : m.start()].lower()
            mod = "next" if "next" in before[-6:] else "last" if "last" in before[-6:] else ""
            if _ALREADY_BEFORE.search(before):
                mod = "since"  # "effective March 1st": it already applies
            add(m.start(), m.end(), _calendar(_month_number(m["mon"]), int(m["d"]), anchor, used, mod))
    for m in MONTH_ONLY.finditer(text):
        used = reading.tense_at(m.start(), m.end())
        if not m["y"] and not reading.without_year(used):
            mod = m["mod"].lower()
            add(m.start(), m.end(), _calendar(_month_number(m["mon"]), None, anchor, used, mod))
    return sorted(refs, key=lambda r: r.start)
