"""Fact-time parsing (points and intervals; unparseable is an error) and value normalisation."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from obsmem.errors import InvalidWhenError
from obsmem.knowledge.store.values import When, normalise_value, parse_when, typed_values


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type,misc]


@pytest.mark.parametrize(
    ("text", "start", "end", "precision"),
    [
        ("2026-07-01T09:30:00Z", utc(2026, 7, 1, 9, 30), None, "instant"),
        ("2026-07-01T09:30:00+02:00", utc(2026, 7, 1, 7, 30), None, "instant"),
        ("2026-07-01T09:30:00", utc(2026, 7, 1, 9, 30), None, "instant"),  # naive → UTC
        ("2026-07-01 09:30", utc(2026, 7, 1, 9, 30), None, "instant"),
        ("2026-07-01", utc(2026, 7, 1), None, "day"),
        ("2026-07", utc(2026, 7, 1), None, "month"),
        ("2026-12", utc(2026, 12, 1), None, "month"),
        ("2026", utc(2026, 1, 1), None, "year"),
        ("2026-07-01/2026-07-15", utc(2026, 7, 1), utc(2026, 7, 16), "day"),
        ("2026-07/2026-08", utc(2026, 7, 1), utc(2026, 9, 1), "month"),
        ("2026-07-01T10:00Z/2026-07-01T12:00Z", utc(2026, 7, 1, 10), utc(2026, 7, 1, 12), "instant"),
        ("  2026-03  ", utc(2026, 3, 1), None, "month"),
    ],
)
def test_when_parses_points_and_intervals(
    text: str, start: datetime, end: datetime | None, precision: str
) -> None:
    parsed = parse_when(text)
    assert parsed == When(start=start, end=end, precision=precision)  # type: ignore[arg-type]
    assert parsed.is_point is (end is None)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "yesterday",
        "last summer",
        "2026-13",
        "2026-02-30",
        "07/01/2026",
        "2026-07-15/2026-07-01",
        "2026-07-01/",
    ],
)
def test_unparseable_when_is_an_error_never_dropped(bad: str) -> None:
    with pytest.raises(InvalidWhenError, match="Cannot read the fact time"):
        parse_when(bad)


def test_when_accepts_datetime_and_date_objects() -> None:
    aware = datetime(2026, 7, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert parse_when(aware) == When(start=utc(2026, 7, 1, 10))
    assert parse_when(date(2026, 7, 1)) == When(start=utc(2026, 7, 1), precision="day")


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        ("Jane lives in Paris.", "jane lives in paris", True),
        ("Jane   lives\nin  Paris", "Jane lives in Paris", True),
        ("[[Jane]] lives in Paris!", "Jane lives in Paris", True),
        ("ＪＡＮＥ", "jane", True),  # NFKC full-width
        ("Straße", "STRASSE", True),  # casefold
        ("Jane lives in Paris", "Jane lived in Paris", False),
        ("Jane lives in Paris", "Jane lives in Rome", False),
    ],
)
def test_normalise_value(left: str, right: str, same: bool) -> None:
    assert (normalise_value(left) == normalise_value(right)) is same


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Mail a.b+c@Ex-ample.co.uk now", {"a.b+c@ex-ample.co.uk"}),
        ("jane@example.com, JANE@EXAMPLE.COM", {"jane@example.com"}),
        ("call +49 151 5550 7720 or +1 (555) 010-9999", {"4915155507720", "15550109999"}),
        ("no@tld and a lone +12", set()),
        ("1.2.3@x.y", {"1.2.3@x.y"}),
        ("9" * 5000 + "@x.y", {"9" * 5000 + "@x.y"}),  # one long run, scanned from its start
    ],
)
def test_typed_values(text: str, found: set[str]) -> None:
    """The phone numbers (digits) and email addresses (casefolded) a tombstone is matched on.
    Their patterns start only where a run of an address's characters starts: a long run with no
    "@" was scanned once per character (quadratic; benchmarks/pathological.py --check
    --routine typed-values)."""
    assert typed_values(text) == found
