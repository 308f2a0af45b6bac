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
* look-alike letters, on write: a Cyrillic or Greek letter that looks like a Latin one is read
  as that letter on both sides ("pаsswоrd" with a Cyrillic а and о is "password"), so a
  tombstoned value spelled with them is refused; reads hide exact keys only, as above;
* typed values, on write too: a text giving every phone number and email address the
  tombstoned one gives is the same value however it is worded or written ("my mobile is
  0151-234-5678" against "their phone number is +49 151 2345678"; :func:`typed_values` and
  :func:`same_typed` say which forms are one number or address), unless a negation differs;
  and a text giving numbers or addresses of its own that are not all the tombstoned one's is
  another value, however near its wording or key (``old.alice@…`` and ``oldalice@…`` share
  a key; reads do not hide one for the other either).

Forgetting (:func:`forget_key`, :func:`forgotten_digest`, :func:`forgotten_in`) matches a value
*inside* a text: the value's key (as above: normalised, letters and digits only; a value that is
one phone number, its national digits, which all its forms hold) occurring in the text's key, so
case, spacing, punctuation and invisible characters never hide an occurrence. A
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
from obsmem.phones import DATE_SHAPED, KEEPS_ZERO, country_code, digit_runs, national_digits
from obsmem.storage.forgetting import canonical

__all__ = [
    "NEAR_DUPLICATE_JACCARD",
    "InvalidWhenError",
    "When",
    "check_instant",
    "exact_digest",
    "exact_form",
    "forget_key",
    "forgotten_digest",
    "forgotten_in",
    "near_duplicate",
    "near_duplicate_tokens",
    "normalise_value",
    "parse_when",
    "gives_all",
    "gives_any",
    "same_typed",
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
    # a phone number: international (``+49 …``, ``0049 …``) or national (``0151 …``, ``(0151) …``),
    # however it is spaced; begun only where no letter, digit or "+" comes before it
    re.compile(r"(?<![\w+])(?:(?P<intl>(?:\+|00)\s?[1-9][\d ()./-]{5,}\d)|(?P<national>\(?0[1-9][\d ()./-]{4,}\d))"),
    # an email address; begun only where a run of its characters begins, so a long run with no
    # "@" is scanned once, not once per character in it (quadratic: 1.1 s for 20 KB of digits)
    re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
)
#: The trunk prefix written inside an international number: "+49 (0)151 …".
_TRUNK_IN_INTERNATIONAL = re.compile(r"\(\s*0\s*\)")
_SEPARATED = re.compile(r"\d[ ()./-]+\d")
_PHONE_DIGITS = (7, 15)
"""The fewest and most digits of a national number (E.164 allows at most 15)."""
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")

#: Words that make a number without "+" a phone number ("my mobile is 0151 …", "call 0049 …").
_PHONE_WORDS = re.compile(
    r"phone|mobile|\bcell|\btel\b|\btel\.|telephone|\bfax\b|landline|number|\bcall|\bring\b|"
    r"\bsms\b|\btext\b|whatsapp|signal|\breach\b|\bhandy\b|\btelefon",
    re.IGNORECASE,
)


def _digits(text: str) -> str:
    """The decimal digits of ``text`` as ASCII ("١٥١" and "１٥１" are "151")."""
    return "".join(str(unicodedata.decimal(ch)) for ch in text if unicodedata.decimal(ch, None) is not None)


def _phone(match: re.Match[str]) -> str | None:
    """A phone number's canonical form: an international one's digits with its country code
    (``+``/``00`` and a written trunk ``0``, "(0)", dropped: "4915123…"), a national one's digits
    with its trunk prefix ("015123…"); None for what is a date or too short or long."""
    if match.group("intl") is not None:
        digits = _digits(_TRUNK_IN_INTERNATIONAL.sub(" ", match.group("intl").removeprefix("+").removeprefix("00")))
        code = country_code(digits)
        rest = digits[len(code):]
        if code not in KEEPS_ZERO:
            rest = rest.removeprefix("0")  # "+49 0151 …", a trunk 0 kept by mistake
        return code + rest
    text = match.group("national")
    digits = _digits(text)
    if DATE_SHAPED.fullmatch(text) or not _PHONE_DIGITS[0] <= len(digits) <= _PHONE_DIGITS[1]:
        return None
    return digits


def typed_values(text: str) -> set[str]:
    """The phone numbers and email addresses a text holds, in the forms :func:`same_typed` compares.

    A phone number is its digits: an international number's with its country code and without
    ``+``, ``00`` or a written trunk ``(0)`` ("+49 (0)151 234 5678" and "0049-151-2345678" are
    ``491512345678``; digits of any script count), a national number's with its leading trunk ``0`` ("0151 234 56 78" is
    ``01512345678``); so a form starting with ``0`` is national (no country code starts with 0).
    A number without "+" (national, or international after ``00``) is read only in a text that
    speaks of a phone ("phone", "mobile", "number", "call", "fax", "reach", …: "order 0012345678"
    is an id, not a number to match by its digits), a national one only from 7 to 15 digits and
    not when it is shaped as a date ("05.12.2026"). An email address is casefolded and nothing else: ``mailto:``, angle brackets
    and spacing around it are not part of it, and dots or a ``+tag`` in its local part are kept
    (gmail ignores them, other providers do not: ``j.doe@`` and ``jdoe@`` may be two people)."""
    found: set[str] = set()
    digits = text if text.isascii() else _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)
    spoken = None  # whether the text speaks of a phone: read once, for the first number without "+"
    for match in _TYPED[0].finditer(digits):
        if not match.group(0).startswith("+"):
            if spoken is None:
                spoken = _PHONE_WORDS.search(text) is not None
            if not spoken:
                continue  # "order 0012345678", "account 0123456789": an id, not a phone number
        phone = _phone(match)
        if phone:
            found.add(phone)
    return found | {m.group(0).casefold() for m in _TYPED[1].finditer(text)}


def same_typed(first: str, second: str) -> bool:
    """Whether two of :func:`typed_values`' values are one phone number or email address.

    Equal forms are. A national number (``0`` + its national digits, no country code) and an
    international one are the same number when the international one is its country code (which
    the E.164 codes, being prefix-free, delimit) followed by those national digits, without the
    trunk ``0`` or, as Italian numbers keep it, with it ("0151 2345678" is "+49 151 2345678" and
    "06 1234 5678" is "+39 06 1234 5678"; "+49 1151 2345678" is neither). A
    national number does not say its country, so it is taken as the same as that number in every
    country ("0151 2345678" is also "+43 151 2345678"): a deleted number is refused in every form
    it may have, at the price of refusing the same digits in another country. Two international
    numbers with different country codes, and two national numbers, are never the same unless
    their digits are."""
    if first == second:
        return True
    if "@" in first or "@" in second:
        return False
    national, international = (first, second) if first.startswith("0") else (second, first)
    if not national.startswith("0") or international.startswith("0"):
        return False
    code = country_code(international)
    return international[len(code):] in (national[1:], national)


class _Typed:
    """``given`` typed values, looked up by :func:`same_typed` in constant time: the values as
    they are, the national numbers (``0…``), and each international number's digits after its
    country code (what a national number equals without, or with, its trunk ``0``)."""

    __slots__ = ("exact", "national", "after_code")

    def __init__(self, given: Iterable[str]) -> None:
        self.exact = set(given)
        self.national = {v for v in self.exact if v.startswith("0") and "@" not in v}
        self.after_code = {
            v[len(country_code(v)):] for v in self.exact if "@" not in v and not v.startswith("0")
        }

    def __contains__(self, value: str) -> bool:
        if value in self.exact:
            return True
        if "@" in value:
            return False
        if value.startswith("0"):  # a national number: an international one ends in its digits
            return value[1:] in self.after_code or value in self.after_code
        rest = value[len(country_code(value)):]
        return "0" + rest in self.national or rest in self.national


def gives_all(wanted: Iterable[str], given: Iterable[str]) -> bool:
    """Whether every typed value in ``wanted`` is one of ``given`` (:func:`same_typed`; linear)."""
    have = _Typed(given)
    return all(value in have for value in wanted)


def gives_any(wanted: Iterable[str], given: Iterable[str]) -> bool:
    """Whether some typed value in ``wanted`` is one of ``given`` (:func:`same_typed`; linear)."""
    have = _Typed(given)
    return any(value in have for value in wanted)


#: Letters of other scripts that look like Latin ones (after casefolding), read as those on the
#: write side of a tombstone: "pаsswоrd" with a Cyrillic а and о is "password". (NFKC already
#: folds fullwidth and mathematical letters.) A subset of Unicode's confusables (UTS #39), the
#: Cyrillic and Greek look-alikes of a-z; a text wholly in one of those scripts is mapped on both
#: sides the same way, so its different words stay different.
_LOOKALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k", "ӏ": "l",
    "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "с": "c", "ѕ": "s", "т": "t", "у": "y", "ԝ": "w",
    "х": "x", "ԁ": "d", "ɡ": "g", "ı": "i", "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k",
    "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w",
})


def latin_lookalikes(text: str) -> str:
    """``text`` in NFKC with the look-alike letters of :data:`_LOOKALIKES` read as Latin ones (case
    and everything else kept): what a pattern for Latin words should look at as well."""
    return unicodedata.normalize("NFKC", text).translate(_LOOKALIKES)


def _latin_lookalikes(text: str) -> str:
    """``text`` normalised (:func:`normalise_value`) with look-alike letters read as Latin ones."""
    return normalise_value(text).translate(_LOOKALIKES)


def same_value(tombstoned: str, value: str, *, near: bool) -> bool:
    """Whether ``value`` is the ``tombstoned`` one: the same key, or (``near``) a text giving
    the same phone numbers and email addresses the tombstoned one gives (:func:`same_typed`: "my
    mobile is 0151 …" for "their phone number is +49 151 …"), unless a negation differs, or a
    near-duplicate. A text giving phone numbers or email addresses of its own that are not all
    the tombstoned one's is another value however near its wording ("their email is
    new.alice@…" is not "their email is old.alice@…")."""
    typed = typed_values(tombstoned)
    theirs = typed_values(value) if typed else set()
    if theirs and not gives_all(typed, theirs) and not _writes_all(typed, value, theirs):
        return False  # its own numbers or addresses: even "old.alice@" and "oldalice@" share a key
    if value_key(tombstoned) == value_key(value):
        return True
    if not near:
        return False
    tombstoned, value = _latin_lookalikes(tombstoned), _latin_lookalikes(value)  # "pаsswоrd" is "password"
    if value_key(tombstoned) == value_key(value):
        return True
    if theirs:
        a, b = near_duplicate_tokens(tombstoned), near_duplicate_tokens(value)
        return not (a ^ b) & _NEGATIONS
    return near_duplicate(tombstoned, value)


def _writes_all(typed: Iterable[str], text: str, given: set[str]) -> bool:
    """Whether ``text`` (whose typed values are ``given``) writes every phone number of ``typed``
    (its national digits inside a number of the text: "+49 151 2345678 (24/7)" writes
    491512345678, though the number reader takes the note for more digits) and every address
    of it. Linear."""
    runs: list[str] | None = None
    for value in typed:
        if "@" in value:
            if value not in given:
                return False
            continue
        runs = runs if runs is not None else digit_runs(text)
        if value.startswith("0"):  # national: that number in every country (as same_typed reads it)
            if not any(value[1:] in run for run in runs):
                return False
            continue
        own = value[len(country_code(value)):]  # international: with its country code, or national
        if not any(value in run or run.startswith("0" + own) or run == own for run in runs):
            return False
    return True


_FORGOTTEN_DOMAIN = b"obsmem.knowledge.forgotten.v1\x00"


def forget_key(value: str) -> str:
    """What a forgotten value is matched on: its :func:`value_key` ("" when it holds no letter or
    digit); for a value that is one phone number and nothing else, its national digits, without
    country code or trunk 0 ("+49 151 2345678", "0151-234-5678" and "0049 151 2345678" are all
    ``1512345678``), which every form of the number holds: the number is forgotten however it is
    written, in every country (as a national number is taken by :func:`same_typed`)."""
    text = value.strip()
    text = text if text.isascii() else _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)
    match = _TYPED[0].fullmatch(text)
    # "+…", "0151 …" or "00 49 …" with a separator: "0012345678" written solid is an id as likely
    phone = _phone(match) if match and (text[:2] != "00" or _SEPARATED.search(text)) else None
    if phone:
        own = phone[1:] if phone.startswith("0") else phone[len(country_code(phone)):].removeprefix("0")
        if len(own) >= _PHONE_DIGITS[0] - 1:
            return own
    return value_key(value)


def forgotten_digest(key: str) -> str:
    """The stored form of a forgotten value's key: hex SHA-256 under a domain prefix."""
    return hashlib.sha256(_FORGOTTEN_DOMAIN + key.encode("utf-8")).hexdigest()


_EXACT_DOMAIN = b"obsmem.knowledge.forgotten.exact.v1\x00"


def exact_form(value: str) -> str | None:
    """What a forget of messages and observations (:func:`obsmem.storage.forgetting.holds`)
    looks for: the value's canonical spelling (:func:`~obsmem.storage.forgetting.canonical`:
    ``<`` and ``&lt;`` as ``‹``, runs of whitespace as one space), case and punctuation kept.
    None for a value that is one phone number (matched there by its digits in any spelling, as
    :func:`forget_key` keeps it) or whose canonical spelling is blank."""
    if national_digits(value) is not None:
        return None
    form = canonical(value)
    return form if form.strip() else None


def exact_digest(form: str) -> str:
    """The stored form of a forgotten value's :func:`exact_form`: hex SHA-256 under a domain
    prefix of its own (a digest of the value itself, no weaker than :func:`forgotten_digest`)."""
    return hashlib.sha256(_EXACT_DOMAIN + form.encode("utf-8")).hexdigest()


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
