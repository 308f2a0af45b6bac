"""Text rules shared by the offline observer and reflector: sentences, pronouns, dates, fact keys.

Everything here is a pure function of its arguments (no clock, no I/O, no randomness), so the
offline observer and reflector are deterministic: the same input always gives byte-identical
output. The rules are English-only heuristics built from regular expressions. They are written
to fail *safe*: when a rule is unsure it keeps text (or leaves a date unannotated) rather than
inventing a meaning, because memory that is slightly verbose is better than memory that lies.

Date rules (see :func:`resolve_dates`), all relative to the message's local date:

* ``tomorrow`` / ``yesterday`` / ``the day after tomorrow`` / ``N days ago`` / ``in N days`` give
  an exact ``(meaning Mon D, YYYY)``; weeks, months and years counted that way are approximate
  and give ``(estimated …)``.
* ``next <weekday>`` is that weekday **in the next calendar week** (weeks start on Monday): on
  Wednesday 2025-06-18 "next Friday" is Jun 27, on Sunday 2025-06-15 it is Jun 20. People who
  mean the coming Friday usually say "on Friday" or "this Friday", which give the coming
  occurrence (Jun 20 from that Wednesday). ``last <weekday>`` mirrors it (previous calendar week).
* A bare weekday is the coming occurrence, or the most recent past one when the sentence is in
  the past tense ("on Monday I went …").
* ``next/last week`` → ``(meaning week of <Monday>)``; ``this/next/last weekend`` →
  ``(meaning weekend of <Saturday>)``; ``next/last month`` → ``(meaning Jul 2025)``.
* Month names and "June 20"-style dates without a year are resolved only when the sentence shows
  tense (future → next occurrence, past → last occurrence); "my birthday is June 20" is a
  recurring fact and stays unannotated. Dates with an explicit year are already absolute.
* Vague words ("recently", "soon", "a few days ago", "today") are never annotated.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

__all__ = [
    "DateRef",
    "FactKey",
    "condense",
    "estimate_tokens",
    "fact_key",
    "format_day",
    "is_plan_text",
    "key_terms",
    "names",
    "names_and_numbers",
    "normalise",
    "resolve_dates",
    "shorten",
    "split_sentences",
    "third_person",
]

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip


def estimate_tokens(text: str) -> int:
    """About four characters per token: the fallback when no real counter is given."""
    return math.ceil(len(text) / 4) if text else 0


# ----------------------------------------------------------------------------------------------
# Cleaning and sentence splitting
# ----------------------------------------------------------------------------------------------

_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "\u00a0": " "})
_ABBREVIATIONS = frozenset(
    {"dr", "mr", "mrs", "ms", "st", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e", "approx",
     "no", "inc", "ltd", "co", "a.m", "p.m", "mt", "ave", "dept", "est", "fig", "u.s"}
)  # fmt: skip
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+(?=[A-Z0-9\"'(])")
_LIST_MARK = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+")


def clean(text: str) -> str:
    """Normalise typographic quotes and collapse runs of spaces (newlines are kept)."""
    text = text.translate(_QUOTES)
    return re.sub(r"[ \t]+", " ", text).strip()


def strip_markdown(text: str) -> str:
    """Drop emphasis, inline code ticks, headings and link targets; keep the words."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)([^*\n]+?)\*(?!\w)", r"\1", text)
    text = text.replace("`", "")
    return re.sub(r"^\s*#{1,6}\s+", "", text, flags=re.M)


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences; each line of a list is its own sentence.

    A period after a known abbreviation ("Dr.", "e.g.") or a single capital (an initial) does
    not end a sentence. Splitting is linear in the text length.
    """
    out: list[str] = []
    for block in clean(text).splitlines():
        block = _LIST_MARK.sub("", block).strip()
        if not block:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(block):
            before = block[start : match.start() + 1].split()
            word = before[-1].rstrip(".!?").lower() if before else ""
            if block[match.start()] == "." and (word in _ABBREVIATIONS or len(word) == 1):
                continue
            piece = block[start : match.end()].strip()
            if piece:
                out.append(piece)
            start = match.end()
        tail = block[start:].strip()
        if tail:
            out.append(tail)
    return out


# ----------------------------------------------------------------------------------------------
# Pronouns
# ----------------------------------------------------------------------------------------------

_THIRD_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        (r"\b[Ii]'m\b", "they are"),
        (r"\b[Ii] am\b", "they are"),
        (r"\b[Aa]m [Ii]\b", "are they"),
        (r"\b[Ii]'ve\b", "they have"),
        (r"\b[Ii]'ll\b", "they will"),
        (r"\b[Ii]'d\b", "they would"),
        (r"\b[Ii] was\b", "they were"),
        (r"\b(was) [Ii]\b", "were they"),
        (r"(?<![\w.'])[Ii](?![\w.'])", "they"),
        (r"\b[Mm]yself\b", "themselves"),
        (r"\b[Mm]y\b", "their"),
        (r"\b[Mm]ine\b", "theirs"),
        (r"\bme\b", "them"),
        (r"\b[Ww]e're\b", "they are"),
        (r"\b[Ww]e've\b", "they have"),
        (r"\b[Ww]e'll\b", "they will"),
        (r"\b[Ww]e'd\b", "they would"),
        (r"\b[Ww]e\b", "they"),
        (r"\b[Oo]urselves\b", "themselves"),
        (r"\b[Oo]urs\b", "theirs"),
        (r"\b[Oo]ur\b", "their"),
        (r"\bus\b", "them"),
    )
)
_ASSISTANT_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        (r"\b[Yy]ou're\b", "the user is"),
        (r"\b[Yy]ou've\b", "the user has"),
        (r"\b[Yy]ours\b", "the user's"),
        (r"\b[Yy]our\b", "the user's"),
        (r"\b[Yy]ou\b", "the user"),
        (r"\b[Ii]'ll\b", "Assistant will"),
        (r"\b[Ii]'m\b", "Assistant is"),
        (r"\b[Ii]'ve\b", "Assistant has"),
        (r"\b[Ii] have\b", "Assistant has"),
        (r"(?<![\w.'])I(?![\w.'])", "Assistant"),
        (r"\bmy\b", "its"),
        (r"\bme\b", "the assistant"),
        (r"\b[Ll]et's\b", "they will"),
    )
)
_IRREGULAR_PARTICIPLES = frozenset({"written", "done", "taken", "given", "seen", "chosen", "drawn"})


def third_person(text: str) -> str:
    """Rewrite a user's first-person text in the third person ("I'm" → "they are", "my" → "their").

    "they" keeps the verb forms of "I" (except am/was), so no conjugation is needed.
    """
    for pattern, repl in _THIRD_PERSON:
        text = pattern.sub(repl, text)
    return text


def assistant_person(text: str) -> str:
    """Rewrite an assistant sentence about itself: "I've booked your table" → "Assistant booked …"."""
    match = re.match(r"^(?:I've|I have)\s+(\w+)\b", text)
    if match and match.group(1).lower() not in _IRREGULAR_PARTICIPLES and match.group(1) != "been":
        text = "Assistant " + text[match.end(1) - len(match.group(1)) :]
    for pattern, repl in _ASSISTANT_PERSON:
        text = pattern.sub(repl, text)
    return text


# ----------------------------------------------------------------------------------------------
# Names, numbers, normalisation, shortening
# ----------------------------------------------------------------------------------------------

_NAME = re.compile(
    r"\b[A-Z][\w'&-]*(?:(?:\s(?:of|de|da|das|do|dos|di|del|der|du|van|von|la|le|the|and|&))?\s[A-Z][\w'&-]*)*"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[-*•]\s+)$")
_QUANTITY = re.compile(
    r"[$€£]\s?\d[\d,.]*(?:\s?[kKmM]\b)?"
    r"|\b\d[\d,.]*(?:\s?(?:-|–|to)\s?\d[\d,.]*)?\s?(?:%|°\s?[CF]?\b|°"
    r"|(?:EUR|USD|GBP|CHF|euros?|dollars?|pounds?|km/h|km|mi|miles?|kg|lbs?|g|m|cm|mm|ml|l|GB|MB|TB|"
    r"hours?|hrs?|h|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|years?|people|persons?|"
    r"guests?|nights?|pm|am|AM|PM|x)\b)"
    r"|\b\d{1,2}:\d{2}(?:\s?[ap]m\b)?"
)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*\d(?![\w])|(?<![\w.])\d(?![\w.,])")
_NOT_NAMES = frozenset(
    "I I'm I've I'll I'd OK Ok User Assistant In The A An It It's This That These Those My Your Our "
    "We You He She They On At For And But So If When What How Why Where Who Which Here There Also "
    "Then Yes No Sure Great Thanks Thank Please Just Let Let's Hi Hello Hey Done Perfect Note".split()
)  # fmt: skip


def names(text: str) -> list[str]:
    """Capitalised names (people, places, organisations), not counting sentence-initial words."""
    found: list[str] = []
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0] in _NOT_NAMES:
            words.pop(0)
        if len(words) == 1 and words[0] == match.group(0) and _SENTENCE_START.search(text[: match.start()]):
            continue  # a lone capitalised word opening a sentence is usually not a name
        token = " ".join(words).rstrip("'-&")
        if token and token not in _NOT_NAMES and token not in found:
            found.append(token)
    return found


def key_terms(text: str) -> list[str]:
    """Names and quantities (amounts, times, measures): what must survive condensing."""
    amounts: list[str] = []
    for match in _QUANTITY.finditer(text):
        token = match.group(0).strip()
        if token not in amounts:
            amounts.append(token)
    joined = " ".join(amounts)
    return [n for n in names(text) if len(n) > 1 and n not in joined] + amounts


def names_and_numbers(text: str) -> list[str]:
    """:func:`key_terms` plus any other number: the signal that a sentence carries facts."""
    found = key_terms(text)
    joined = " ".join(found)
    for match in _NUMBER.finditer(text):
        if match.group(0) not in joined:
            found.append(match.group(0))
    return found


def normalise(text: str) -> str:
    """The dedupe key of a line: lowercase words and numbers only, run counts removed."""
    text = re.sub(r"\((?:ran )?\d+ times\)|×\d+", " ", text.translate(_QUOTES).lower())
    return " ".join(re.findall(r"[\w°%$€£@]+(?:[.'/:-][\w°%$€£@]+)*", text))


_ANNOTATION = re.compile(r"(?:\s*\((?:meaning|estimated|changing from)\b[^()]*\))+\.?\s*$")


def split_annotations(text: str) -> tuple[str, str]:
    """Split trailing "(meaning …)", "(estimated …)", "(changing from …)" off a line's text."""
    match = _ANNOTATION.search(text)
    if not match:
        return text, ""
    return text[: match.start()], match.group(0).strip().rstrip(".")


def shorten(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, ending with "…".

    Trailing date/change annotations are kept whole: they are what makes a line's date
    resolvable later, so they are worth more than the words they displace.
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    body, notes = split_annotations(text)
    room = max(limit - len(notes) - 2 if notes else limit - 1, 12)
    if len(body) > room:
        cut = body[:room]
        space = cut.rfind(" ")
        if space > room * 0.6:
            cut = cut[:space]
        body = cut.rstrip(" ,;:-.(") + "…"
    return f"{body} {notes}" if notes else body


_HEDGES = re.compile(
    r"\b(?:basically|actually|really|very|just|quite|pretty much|kind of|sort of|definitely|"
    r"honestly|literally|simply|certainly|of course)\b,?\s*",
    re.I,
)


def condense(text: str, limit: int) -> str:
    """Drop hedge words and markdown, then :func:`shorten` to ``limit`` characters."""
    text = strip_markdown(text)
    text = _HEDGES.sub("", text)
    return shorten(re.sub(r"\s+([,.;:!?])", r"\1", text), limit)


def sentence_end(text: str) -> str:
    """End a rendered line with a period unless it already ends a sentence."""
    text = text.strip()
    return text if not text or text[-1] in ".?!…:" else text + "."


# ----------------------------------------------------------------------------------------------
# Dates
# ----------------------------------------------------------------------------------------------


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


_N = r"(?P<n>\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_RELATIVE_DAY = re.compile(
    r"\b(?P<w>the day after tomorrow|the day before yesterday|tomorrow|yesterday)\b", re.I
)
_AGO = re.compile(rf"\b{_N} (?P<unit>day|week|month|year)s? ago\b", re.I)
_IN_N = re.compile(rf"\bin {_N} (?P<unit>day|week|month|year)s?\b", re.I)
_WEEKDAY = re.compile(
    r"\b(?:(?P<mod>next|last|this|this coming|coming|on)\s+)?"
    r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.I,
)
_PERIOD = re.compile(r"\b(?P<mod>next|last|this)\s+(?P<unit>weekend|week|month|year)\b", re.I)
_MON = (
    r"(?P<mon>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_MONTH_DAY = re.compile(rf"\b{_MON}\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)(?:,?\s+(?P<y>\d{{4}}))?")
_DAY_MONTH = re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\b(?:,?\s+(?P<y>\d{{4}}))?")
_MONTH_ONLY = re.compile(
    r"\b(?P<mod>in|during|by|until|since|this|next|last|early|mid|late|end of|beginning of)\s+"
    r"(?P<mon>January|February|March|April|May|June|July|August|September|October|November|December)"
    r"\b(?!\s+\d)(?:,?\s+(?P<y>\d{4}))?"
)
_FUTURE = re.compile(
    r"\b(?:will|shall|going to|gonna|plan|plans|planning|want|wants|need|needs|hope|hoping|"
    r"intend|intends|tomorrow|next|upcoming|coming|looking forward|scheduled|booked for)\b|'ll\b|"
    r"\b(?:am|are)\s+\w+ing\b|'(?:m|re)\s+\w+ing\b|\bin \d+ \w+s?\b",
    re.I,
)
_PAST = re.compile(
    r"\b(?:was|were|went|did|had|got|visited|saw|met|came|bought|left|arrived|ago|yesterday|"
    r"last|took|made|told|said|flew|drove|moved|started|finished|spent|celebrated|attended|"
    r"returned|happened|called|joined|quit|graduated|lost|won|ate|ran)\b",
    re.I,
)


def _tense(text: str) -> str | None:
    if _FUTURE.search(text):
        return "future"
    if _PAST.search(text):
        return "past"
    return None


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


def _weekday(mod: str | None, wd: int, anchor: date, tense: str | None) -> date:
    monday = anchor - timedelta(days=anchor.weekday())
    mod = (mod or "").lower()
    if mod == "next":
        return monday + timedelta(days=7 + wd)
    if mod == "last":
        return monday + timedelta(days=wd - 7)
    ahead = (wd - anchor.weekday()) % 7
    if mod == "this":
        return anchor + timedelta(days=ahead)
    if tense == "past" and "coming" not in mod:
        return anchor - timedelta(days=(anchor.weekday() - wd) % 7 or 7)
    return anchor + timedelta(days=ahead or 7)


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
    if tense is None:
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


def resolve_dates(text: str, anchor: date) -> list[DateRef]:
    """Find resolvable time references in ``text`` and resolve them against ``anchor``.

    Returns them in text order; overlapping matches keep the earliest pattern in the table.
    """
    tense = _tense(text)
    refs: list[DateRef] = []

    def add(start: int, end: int, note: str | None) -> None:
        if note and not any(r.start < end and start < r.end for r in refs):
            refs.append(DateRef(start, end, note))

    for m in _RELATIVE_DAY.finditer(text):
        offset = {"the day after tomorrow": 2, "the day before yesterday": -2, "tomorrow": 1}
        days = offset.get(m["w"].lower(), -1)
        add(m.start(), m.end(), f"meaning {format_day(anchor + timedelta(days=days))}")
    for m in _AGO.finditer(text):
        add(m.start(), m.end(), _counted(_count(m["n"]), m["unit"].lower(), anchor, -1))
    for m in _IN_N.finditer(text):
        add(m.start(), m.end(), _counted(_count(m["n"]), m["unit"].lower(), anchor, 1))
    for m in _PERIOD.finditer(text):
        add(m.start(), m.end(), _period(m["mod"].lower(), m["unit"].lower(), anchor))
    for m in _WEEKDAY.finditer(text):
        if re.match(r",?\s*(?:the\s+)?(?:\d|[A-Z][a-z]{2})", text[m.end() : m.end() + 8]):
            continue  # "Saturday, June 21": the explicit date says it already
        when = _weekday(m["mod"], _WEEKDAYS.index(m["wd"].lower()), anchor, tense)
        add(m.start(), m.end(), f"meaning {format_day(when)}")
    for pattern in (_MONTH_DAY, _DAY_MONTH):
        for m in pattern.finditer(text):
            if m["y"]:
                add(m.start(), m.end(), None)
                continue
            before = text[max(0, m.start() - 6) : m.start()].lower()
            mod = "next" if "next" in before else "last" if "last" in before else ""
            note = _calendar(_month_number(m["mon"]), int(m["d"]), anchor, tense, mod)
            add(m.start(), m.end(), note)
    for m in _MONTH_ONLY.finditer(text):
        if not m["y"]:
            mod = m["mod"].lower()
            add(m.start(), m.end(), _calendar(_month_number(m["mon"]), None, anchor, tense, mod))
    return sorted(refs, key=lambda r: r.start)


# ----------------------------------------------------------------------------------------------
# Fact keys: which attribute a stated fact sets, so a later statement can supersede it
# ----------------------------------------------------------------------------------------------

_STOP_VALUE = re.compile(
    r"\s(?:and|but|because|since|so|with|for|from|last|next|this|in|on|at|by|yesterday|tomorrow|"
    r"now|recently|until|when|while|as|which|who|where|after|before|instead|starting|anymore|every|each|"
    r"because|since|daily|weekly)\b",
    re.I,
)
_V = r"(?P<v>[^,;!?()]+)"
_OLD = r"(?:from\s+(?P<old>[^,;!?()]+?)\s+)?"
_K = r"(?P<k>[^,;!?()]+)"
_ATTR = (
    r"(?P<k>favou?rite\s+[\w-]+(?:\s+[\w-]+)?|[\w-]+(?:'s|s')\s+name|(?:first\s+|last\s+|full\s+|"
    r"middle\s+|nick)?name|e-?mail(?:\s+address)?|phone(?:\s+number)?|(?:home\s+)?address|birthday|"
    r"date of birth|age|job(?:\s+title)?|title|role|position|occupation|profession|employer|company|"
    r"budget|goal|deadline|time\s?zone|salary|rent|diet|hometown|home\s+town|city|country|"
    r"(?:native|first)\s+language|manager|boss|team|username|handle|website|car|editor|"
    r"operating system|laptop|shoe size|height|weight|blood type|pronouns)"
)
_USER_SUBJECT = re.compile(
    r"\b(?:they|User)\s+(?:\(with others\)\s+)?(?:(?:now|still|currently|also|both|all|just|"
    r"recently|finally|have|had|will|would|are|were|plans? to|wants? to|needs? to|hopes? to|"
    r"is going to|are going to|no longer|not|never|don't|do not|"
    r"[a-z]+ly)\s+){0,3}$",
    re.I,
)
_NEGATION = re.compile(r"\b(?:no longer|not|don't|do not|doesn't|never|stopped)\s+\w*\s*$", re.I)
_KEY_PATTERNS: tuple[tuple[str | None, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern, re.I))
    for key, pattern in (
        (None, rf"\b(?:switched|changed|updated|moved)\s+their\s+{_ATTR}\s+{_OLD}to\s+{_V}"),
        (None, rf"\btheir\s+{_ATTR}\s+(?:is|are|has changed to|changed to)\s+(?:now\s+|still\s+)?{_V}"),
        ("residence", rf"\b(?:live|lives|living|reside|resides|residing|based|settled)\s+in\s+{_V}"),
        ("residence", rf"\b(?:move[ds]?|moving|relocat(?:ed|ing|e))\s+(?:back\s+)?{_OLD}to\s+{_V}"),
        ("employer", rf"\b(?:quit|left)\s+their\s+job\s+at\s+{_V}"),
        ("employer", rf"\b(?:switched|changed)\s+jobs?\s+{_OLD}to\s+{_V}"),
        ("employer", rf"\b(?:work|works|working|worked)\s+(?:at|for)\s+{_V}"),
        ("employer", rf"\b(?:joined|started\s+(?:working\s+)?at|started\s+a\s+(?:new\s+)?job\s+at|"
                     rf"took\s+a\s+job\s+at|got\s+a\s+job\s+at)\s+{_V}"),
        ("name", rf"\b(?:are|is)\s+(?:called|named)\s+{_V}"),
        ("tool for", rf"\b(?:use[sd]?|using|switched\s+{_OLD}to)\s+(?P<v>[^,;!?()]+?)\s+for\s+{_K}"),
    )
)  # fmt: skip
_STATE_OBJECT = re.compile(
    r"^User stated they (?:now\s+)?(?:use|have|own|drive|prefer|like|love|eat|play|are on|are using|"
    r"are a|are an|are)\s+(?P<v>[^,;!?()]+)",
    re.I,
)
_PLAN = re.compile(
    r"^User (?:plans|wants|needs|hopes|intends|is looking forward|is planning|is going)\b|"
    r"\b(?:will|going to|plans? to|planning to|want to|wants to|need to|needs to|hope to)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class FactKey:
    """An attribute a statement sets: ``key`` ("residence", "favourite colour"), its new
    ``value`` ("" when the statement negates it) and the ``old`` value when stated."""

    key: str
    value: str
    old: str | None = None


def _clip(raw: str | None) -> str:
    if not raw:
        return ""
    raw = re.split(r"\.(?:\s|$)", raw, maxsplit=1)[0]
    stop = _STOP_VALUE.search(raw)
    if stop:
        raw = raw[: stop.start()]
    raw = re.sub(r"^(?:the|a|an)\s+", "", raw.strip(), flags=re.I)
    return raw.strip(" .'\"")


def _key_name(raw: str) -> str:
    key = " ".join(raw.lower().split())
    key = key.replace("favorite", "favourite").replace("colour", "color").replace("e-mail", "email")
    return key.replace("s' name", "s's name")


def is_plan_text(text: str) -> bool:
    """True for intentions ("User plans to …", "… will …"): these never supersede a fact."""
    return bool(_PLAN.search(text))


def fact_key(text: str) -> FactKey | None:
    """The attribute a third-person statement sets, or None when it sets no known attribute.

    Only a fixed set of single-valued attributes is recognised (where you live, who you work
    for, "their <name/email/favourite X/…> is Y", "use X for Y"), because supersession drops
    the older line: a wrong key would silently delete a true fact.
    """
    for key, pattern in _KEY_PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        if key in ("residence", "employer", "tool for") and not _USER_SUBJECT.search(text[: match.start()]):
            continue  # "Avó lives in Graça" is not where the user lives
        groups = match.groupdict()
        if key is None:
            name = _key_name(groups["k"])
        elif key == "tool for":
            name = f"tool for {_clip(groups['k']).lower()}"
        else:
            name = key
        value = _clip(groups.get("v"))
        if not value or name.endswith(" "):
            continue
        negated = bool(
            _NEGATION.search(text[max(0, match.start() - 20) : match.start()])
            or re.match(r"(?:quit|left)\b", match.group(0), re.I)
        )
        return FactKey(
            name, "" if negated else value, _clip(groups.get("old")) or (value if negated else None)
        )
    return None


def state_object(text: str) -> str | None:
    """The object of a simple state line ("User stated they use Vim" → "Vim"), for matching a
    later "(changing from Vim)"."""
    match = _STATE_OBJECT.match(text)
    return _clip(match["v"]) if match else None


# ----------------------------------------------------------------------------------------------
# Compact renderings of tool arguments and results
# ----------------------------------------------------------------------------------------------


def _scalar(value: Any, limit: int) -> str:
    if isinstance(value, str):
        return shorten(value, limit)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        inner = [v for v in value.values() if isinstance(v, str | int | float) and not isinstance(v, bool)]
        return shorten(" ".join(str(v) for v in inner[:3]), limit)
    if isinstance(value, list | tuple):
        head = ", ".join(_scalar(v, limit // 2) for v in list(value)[:3])
        more = f", +{len(value) - 3}" if len(value) > 3 else ""
        return shorten(f"[{head}{more}]", limit)
    return shorten(json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":")), limit)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def compact_args(args: dict[str, Any] | str, limit: int = 80) -> str:
    """``city=Berlin, days=3``: the arguments of a tool call, each value cut to a short form."""
    parsed = _maybe_json(args)
    if isinstance(parsed, dict):
        return shorten(", ".join(f"{k}={_scalar(v, 40)}" for k, v in parsed.items()), limit)
    return shorten(str(parsed), limit)


def _facts(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            if isinstance(item, dict) and not prefix:
                out.extend(_facts(item, f"{key}."))
            elif isinstance(item, list | tuple):
                out.append(f"{prefix}{key}: {len(item)} items {_scalar(item, 90)}")
            elif item not in (None, "", [], {}):
                out.append(f"{prefix}{key}: {_scalar(item, 50)}")
        return out
    if isinstance(value, list | tuple):
        return [f"{len(value)} items: {_scalar(value, 100)}"]
    return [_scalar(value, 120)]


def compact_result(result: Any, is_error: bool, limit: int = 160) -> str:
    """The outcome of a tool run in at most ``limit`` characters: its first key facts."""
    parsed = _maybe_json(result)
    if parsed in (None, "", [], {}):
        text = "no result"
    elif isinstance(parsed, str):
        sentences = split_sentences(strip_markdown(parsed))
        text = " ".join(sentences[:3]) if sentences else "no result"
    else:
        text = ", ".join(_facts(parsed))
    if is_error and not text.lower().startswith(("error", "failed")):
        text = "error: " + text
    return shorten(text, limit)
