"""Pure value handling for knowledge records: fact-time (``when``) parsing and value normalisation.

``when`` is the time a fact *refers to*, as opposed to ``captured_at``, the time the store
learnt it. Capture models propose it as text, so it is parsed strictly: an unparseable value
raises :class:`InvalidWhenError` instead of being dropped, because a silently dropped fact time
turns a dated fact into a timeless one.

Accepted forms (all UTC unless an offset is given; intervals are half-open ``[start, end)``)::

    2026-07-01T09:30:00Z     an instant (naive datetimes are taken as UTC)
    2026-07-01               a point known to the day   (precision "day")
    2026-07                  a point known to the month (precision "month")
    2026                     a point known to the year  (precision "year")
    2026-07-01/2026-07-15    an interval: from the start of the first to the end of the second

A date alone is a *point* with a precision, not a bounded interval: "Jane moved to Berlin on
2026-07-01" does not stop being true on 2026-07-02. Only an explicit ``start/end`` bounds a
fact's validity.

Every date Python holds is legal, to ``9999-12-31T23:59:59.999999Z``: a period that would end
after that instant (``2026/9999-12-31``, ``2026/9999``) ends at it, since no later one exists.
An instant whose offset moves it out of that range in UTC (``0001-01-01T00:00:00+05:00``) and
a value of another type are refused with :class:`InvalidWhenError` naming ``when``.
:func:`check_instant` is the same rule for the read and outbox times (``as_of``, ``now``, ...).

:func:`normalise_value` is the displayed form of a tombstoned value: NFKC, casefolded, with
invisible format characters (zero-width spaces, joiners, the BOM) removed, wikilink brackets
dropped and spacing collapsed. Tombstones are *matched* on three things (:func:`same_value`):

* the exact key, :func:`value_key`: the normalised text with every character that is not a
  letter or digit removed, so ``"Jane\u200bhates tea"``, ``"JANE HATES TEA!!"`` and
  ``"Ｊａｎｅ hates tea"`` are all ``janehatestea``;
* near-duplicates: the token sets of the two texts have a Jaccard similarity of at least
  :data:`NEAR_DUPLICATE_JACCARD` (0.75: one added word in four, e.g. ``"Jane really hates tea"``
  against ``"Jane hates tea"``), unless the texts differ by a negation (``"Jane is not vegan"``
  is a different fact from ``"Jane is vegan"``). Near-duplicates are refused on write; reads
  hide only exact-key matches, so a tombstone never silently hides a differently worded record
  that was stored before it;
* typed values, on write too: a text giving every phone number (by its digits) and email address
  (casefolded) the tombstoned one gives is the same value however it is worded ("my mobile is
  +49 151 …" against "their phone number is +49151…"), unless a negation differs.

Forgetting (:func:`forget_key`, :func:`forgotten_digest`, :func:`forgotten_in`) matches a value
*inside* a text: the value's key (as above: normalised, letters and digits only) occurring in the
text's key, so case, spacing, punctuation and invisible characters never hide an occurrence. A
forgotten value is kept only as a SHA-256 digest of its key (with a domain prefix) and the key's
length in characters: enough to refuse a later text holding it (hash every window of that length
of the text's key), never enough to read it back. A digest of a guessable value can be confirmed
by someone who guesses it; that is the price of refusing it without keeping it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from obsmem.errors import InvalidInputError, InvalidWhenError

__all__ = [
    "NEAR_DUPLICATE_JACCARD",
    "InvalidWhenError",
    "When",
    "check_instant",
    "forget_key",
    "forgotten_digest",
    "forgotten_in",
    "near_duplicate",
    "near_duplicate_tokens",
    "normalise_value",
    "parse_when",
    "same_value",
    "typed_values",
    "value_key",
]


class When(BaseModel):
    """The time a fact refers to: a point (``end is None``) or a half-open interval."""

    model_config = ConfigDict(frozen=True)

    start: datetime
    end: datetime | None = None
    precision: Literal["instant", "day", "month", "year"] = "instant"

    @model_validator(mode="after")
    def _check(self) -> When:
        if self.start.tzinfo is None or (self.end is not None and self.end.tzinfo is None):
            raise ValueError("When times must be timezone-aware")
        if self.end is not None and self.end <= self.start:
            raise ValueError(f"When interval ends ({self.end}) before it starts ({self.start})")
        return self

    @property
    def is_point(self) -> bool:
        return self.end is None


_YEAR = re.compile(r"^\d{4}$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


_LAST_INSTANT = datetime.max.replace(tzinfo=UTC)
"""The latest time Python holds; a period that would end later ends here."""


def _utc(value: datetime) -> datetime:
    """``value`` in UTC (naive: taken as UTC); ValueError when that is outside years 1-9999."""
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is outside the years 1-9999 in UTC") from None


def _first_of(year: int, month: int) -> datetime:
    """Midnight UTC on the first of ``year``-``month``, or :data:`_LAST_INSTANT` after year 9999."""
    return datetime(year, month, 1, tzinfo=UTC) if year <= datetime.max.year else _LAST_INSTANT


def _next_day(start: datetime) -> datetime:
    """``start`` plus one day, or :data:`_LAST_INSTANT` on the last day Python holds."""
    return start + timedelta(days=1) if start.date() < date.max else _LAST_INSTANT


Precision = Literal["instant", "day", "month", "year"]


def _period(text: str) -> tuple[datetime, datetime | None, Precision]:
    """One endpoint: (start, end of the period it names or None for an instant, precision)."""
    if _YEAR.match(text):
        year = int(text)
        return datetime(year, 1, 1, tzinfo=UTC), _first_of(year + 1, 1), "year"
    month = _MONTH.match(text)
    if month:
        year, number = int(month.group(1)), int(month.group(2))
        if not 1 <= number <= 12:
            raise ValueError(f"month {number} out of range")
        start = datetime(year, number, 1, tzinfo=UTC)
        following = _first_of(year + number // 12, number % 12 + 1)
        return start, following, "month"
    if _DAY.match(text):
        day = date.fromisoformat(text)
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        return start, _next_day(start), "day"
    if "T" not in text and " " not in text:
        raise ValueError("not a date or datetime")
    return _utc(datetime.fromisoformat(text.replace("z", "Z"))), None, "instant"


def _when_error(value: object, reason: str) -> InvalidWhenError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else f"{shown[:77]}..."
    return InvalidWhenError(
        f"Cannot read the fact time when={shown} ({reason}). Use an ISO date or datetime such as "
        "'2026-07-01', '2026-07-01T09:30:00Z', '2026-07', '2026', or an interval "
        "'2026-07-01/2026-07-15'.",
        argument="when",
    )


def parse_when(value: str | datetime | date | When) -> When:
    """Parse a fact time; raise :class:`InvalidWhenError` (naming ``when``) on anything it
    cannot read exactly."""
    if isinstance(value, When):
        return value
    if isinstance(value, datetime):
        try:
            return When(start=_utc(value))
        except ValueError as exc:
            raise _when_error(value, str(exc)) from None
    if isinstance(value, date):
        return parse_when(value.isoformat())
    if not isinstance(value, str):
        raise _when_error(value, f"a {type(value).__name__}, not a str, date or datetime")
    text = value.strip()
    try:
        if "/" in text:
            first, _, second = text.partition("/")
            start, _, precision = _period(first.strip())
            end_start, end_of_period, _ = _period(second.strip())
            return When(start=start, end=end_of_period or end_start, precision=precision)
        start, _, precision = _period(text)
        return When(start=start, precision=precision)
    except ValueError as exc:  # pydantic's ValidationError (a backwards interval) is one too
        raise _when_error(value, str(exc)) from None


def check_instant(value: object, argument: str) -> datetime:
    """``value`` as an aware datetime (naive: taken as UTC, like a fact time), or
    :class:`~obsmem.errors.InvalidInputError` naming ``argument`` when it is not a datetime."""
    if not isinstance(value, datetime):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else f"{shown[:77]}..."
        raise InvalidInputError(
            f"{argument} must be a datetime (naive ones are taken as UTC), not {type(value).__name__} {shown}",
            argument=argument,
        )
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value


_SPACES = re.compile(r"\s+")
_TRAILING = ".!?;,:"


NEAR_DUPLICATE_JACCARD = 0.75
"""Token-set Jaccard similarity at or above which a value counts as a tombstoned one reworded."""

_WORD = re.compile(r"\w+", re.UNICODE)
_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot", "n't"}
)


def _visible(text: str) -> str:
    """Drop invisible format characters (category Cf: zero-width spaces, joiners, BOM, bidi marks)."""
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def normalise_value(text: str) -> str:
    """The displayed form of a value: NFKC, casefolded, invisible characters, brackets and spacing removed."""
    folded = _visible(unicodedata.normalize("NFKC", text)).casefold()
    folded = unicodedata.normalize("NFKC", folded).replace("[[", "").replace("]]", "")
    return _SPACES.sub(" ", folded).strip().rstrip(_TRAILING).strip()


def value_key(text: str) -> str:
    """The exact matching key: the normalised value with everything but letters and digits removed."""
    return "".join(ch for ch in normalise_value(text) if ch.isalnum())


def near_duplicate_tokens(text: str) -> set[str]:
    """The tokens :func:`near_duplicate` compares (a negation's "n't" kept as a token of its own)."""
    folded = normalise_value(text).replace("\u2019", "'")
    words = set(_WORD.findall(folded.replace("n't", " ")))
    return words | {"n't"} if "n't" in folded else words


def near_duplicate(first: str, second: str, threshold: float = NEAR_DUPLICATE_JACCARD) -> bool:
    """Whether two values are the same fact trivially reworded (token-set Jaccard, negation-aware)."""
    a, b = near_duplicate_tokens(first), near_duplicate_tokens(second)
    if not a or not b:
        return False
    if (a ^ b) & _NEGATIONS:
        return False
    return len(a & b) / len(a | b) >= threshold


_TYPED = (
    re.compile(r"\+\d[\d ()./-]{6,}\d"),  # an international phone number, however it is spaced
    # an email address; begun only where a run of its characters begins, so a long run with no
    # "@" is scanned once, not once per character in it (quadratic: 1.1 s for 20 KB of digits)
    re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
)


def typed_values(text: str) -> set[str]:
    """The phone numbers (digits only) and email addresses (casefolded) a text holds."""
    found = {"".join(ch for ch in m.group(0) if ch.isdigit()) for m in _TYPED[0].finditer(text)}
    return found | {m.group(0).casefold() for m in _TYPED[1].finditer(text)}


def same_value(tombstoned: str, value: str, *, near: bool) -> bool:
    """Whether ``value`` is the ``tombstoned`` one: the same key, or (``near``) a near-duplicate,
    or a text giving the same phone number or email address the tombstoned one gives ("my mobile
    is …" for "their phone number is …"), unless a negation differs."""
    if value_key(tombstoned) == value_key(value):
        return True
    if not near:
        return False
    if near_duplicate(tombstoned, value):
        return True
    typed = typed_values(tombstoned)
    if typed and typed <= typed_values(value):
        a, b = near_duplicate_tokens(tombstoned), near_duplicate_tokens(value)
        return not (a ^ b) & _NEGATIONS
    return False


_FORGOTTEN_DOMAIN = b"obsmem.knowledge.forgotten.v1\x00"


def forget_key(value: str) -> str:
    """What a forgotten value is matched on: its :func:`value_key` ("" when it holds no letter or digit)."""
    return value_key(value)


def forgotten_digest(key: str) -> str:
    """The stored form of a forgotten value's key: hex SHA-256 under a domain prefix."""
    return hashlib.sha256(_FORGOTTEN_DOMAIN + key.encode("utf-8")).hexdigest()


def forgotten_in(text: str, digests: Iterable[tuple[str, int]]) -> bool:
    """Whether ``text`` holds a forgotten value given as ``(digest, key length)`` pairs.

    Every window of the text's key as long as a forgotten key is hashed and looked up, so the
    cost is one hash per character of the text per distinct length.
    """
    wanted: dict[int, set[str]] = {}
    for digest, length in digests:
        if length > 0:
            wanted.setdefault(length, set()).add(digest)
    if not wanted:
        return False
    key = value_key(text)
    for length, found in wanted.items():
        for start in range(len(key) - length + 1):
            if forgotten_digest(key[start : start + length]) in found:
                return True
    return False
