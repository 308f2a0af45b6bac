"""Table tests for the time words shown to the actor (§4.4, §5.2, §9.11 items 63-65)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from obsmem.om.text.dates import (
    annotate_observations,
    gap_text,
    is_gap_line,
    optimize_for_context,
    parse_loose_date,
    prepare_observations_for_context,
    relative_day_phrase,
    strip_thread_tags,
)
from obsmem.om.text.format import boundary_line

TODAY = date(2025, 6, 15)
NOW = datetime(2025, 6, 15, 12, 0, tzinfo=timezone.utc)


# --- relative_day_phrase -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("days_ago", "phrase"),
    [
        (0, "today"),
        (1, "yesterday"),
        (2, "2 days ago"),
        (6, "6 days ago"),
        (7, "1 week ago"),
        (13, "1 week ago"),
        (14, "2 weeks ago"),
        (29, "4 weeks ago"),
        (30, "1 month ago"),
        (59, "1 month ago"),
        (60, "2 months ago"),
        (364, "12 months ago"),
        (365, "1 year ago"),
        (729, "1 year ago"),
        (730, "2 years ago"),
        (-1, "tomorrow"),
        (-2, "in 2 days"),
        (-6, "in 6 days"),
        (-7, "in 1 week"),
        (-20, "in 2 weeks"),
        (-30, "in 1 month"),
        (-95, "in 3 months"),
        (-365, "in 1 year"),
        (-800, "in 2 years"),
    ],
)
def test_relative_day_phrase(days_ago: int, phrase: str) -> None:
    assert relative_day_phrase(TODAY - timedelta(days=days_ago), TODAY) == phrase


# --- gap_text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), None),
        (timedelta(minutes=-30), None),
        (timedelta(minutes=9, seconds=59), None),
        (timedelta(minutes=10), "10 minutes later"),
        (timedelta(minutes=59, seconds=59), "59 minutes later"),
        (timedelta(hours=1), "1 hour later"),
        (timedelta(hours=1, minutes=1), "1 hour 1 minute later"),
        (timedelta(hours=2, minutes=5), "2 hours 5 minutes later"),
        (timedelta(hours=2, seconds=30), "2 hours later"),
        (timedelta(days=1), "1 day later"),
        (timedelta(days=3, hours=4), "3 days 4 hours later"),
        (timedelta(days=9), "1 week 2 days later"),
        (timedelta(weeks=2), "2 weeks later"),
        (timedelta(days=67), "2 months 1 week later"),
        (timedelta(days=365 + 90), "1 year 3 months later"),
        (timedelta(days=365 * 2 + 30), "2 years 1 month later"),
    ],
)
def test_gap_text(delta: timedelta, text: str | None) -> None:
    assert gap_text(delta) == text


# --- parse_loose_date -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("May 30, 2023", date(2023, 5, 30)),
        ("May 30 2023", date(2023, 5, 30)),
        ("may 30, 2023", date(2023, 5, 30)),
        ("September 3, 2024", date(2024, 9, 3)),
        ("Sep 3, 2024", date(2024, 9, 3)),
        ("Sept. 3, 2024", date(2024, 9, 3)),
        ("June 1st, 2025", date(2025, 6, 1)),
        ("Friday, June 20, 2025", date(2025, 6, 20)),
        ("20 June 2025", date(2025, 6, 20)),
        ("May 27-28, 2023", date(2023, 5, 27)),
        ("May 27 – 28, 2023", date(2023, 5, 27)),
        ("early May 2023", date(2023, 5, 7)),
        ("mid May 2023", date(2023, 5, 15)),
        ("mid-May 2023", date(2023, 5, 15)),
        ("late May 2023", date(2023, 5, 23)),
        ("Late December, 2024", date(2024, 12, 23)),
        ("April to May 2023", date(2023, 4, 1)),
        ("Apr - Jun 2023", date(2023, 4, 1)),
        ("November to February 2024", date(2023, 11, 1)),
        ("May 2023", date(2023, 5, 1)),
        ("2023-05-30", date(2023, 5, 30)),
        ("  2023-05-30. ", date(2023, 5, 30)),
    ],
)
def test_parse_loose_date_accepts(text: str, expected: date) -> None:
    assert parse_loose_date(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "May 30", "next Friday", "Feb 30, 2023", "2023-13-01", "Smarch 3, 2023", "30/05/2023", "2023"],
)
def test_parse_loose_date_rejects(text: str) -> None:
    assert parse_loose_date(text) is None


# --- annotate_observations --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "* 🔴 (09:00) User will fly to Rome (meaning June 1, 2025).",
            "* 🔴 (09:00) User will fly to Rome"
            " (meaning June 1, 2025 - 2 weeks ago, likely already happened).",
        ),
        (
            "* User flew to Rome (meaning June 1, 2025).",
            "* User flew to Rome (meaning June 1, 2025 - 2 weeks ago).",
        ),
        (
            "* User will fly to Rome (meaning June 20, 2025).",
            "* User will fly to Rome (meaning June 20, 2025 - in 5 days).",
        ),
        (
            "* User is going to call (meaning June 15, 2025).",
            "* User is going to call (meaning June 15, 2025 - today).",
        ),
        (
            "* Launch (estimated late May 2025)",
            "* Launch (estimated late May 2025 - 3 weeks ago)",
        ),
        (
            "* Trip planned (meaning May 27-28, 2025) and dinner (meaning 2025-06-14)",
            "* Trip planned (meaning May 27-28, 2025 - 2 weeks ago)"
            " and dinner (meaning 2025-06-14 - yesterday)",
        ),
        # no year, or not a date: untouched
        ("* Trip (meaning May 30).", "* Trip (meaning May 30)."),
        ("* Word (meaning a greeting).", "* Word (meaning a greeting)."),
        ("* Trip (meaning (roughly) May 2025)", "* Trip (meaning (roughly) May 2025)"),
    ],
)
def test_annotate_meaning(line: str, expected: str) -> None:
    assert annotate_observations(line, NOW) == expected


@pytest.mark.parametrize(
    "intent",
    [
        "will",
        "plans to",
        "plan to",
        "is planning to",
        "is looking forward to",
        "is going to",
        "intends to",
        "intend to",
        "wants to",
        "want to",
        "needs to",
        "need to",
        "is about to",
        "WILL",
    ],
)
def test_future_intent_marks_past_dates(intent: str) -> None:
    out = annotate_observations(f"* User {intent} visit Rome (meaning May 1, 2025)", NOW)
    assert out.endswith("(meaning May 1, 2025 - 1 month ago, likely already happened)")


@pytest.mark.parametrize(
    "text", ["* User willingly visited (meaning May 1, 2025)", "* Goodwill (meaning May 1, 2025)"]
)
def test_future_intent_needs_whole_words(text: str) -> None:
    assert "likely already happened" not in annotate_observations(text, NOW)


def test_recent_and_newest_headers_get_relative_phrases_and_no_gap_lines() -> None:
    """The newest header (the anchor for "now") and those of the last two weeks say how long
    ago; older ones stay absolute, and no gap line is written between them (their dates say it)."""
    text = "\n".join(
        [
            "Date: Apr 1, 2025",
            "* a",
            "",
            "Date: May 10, 2025",
            "* b",
            "",
            "Date: May 11, 2025",
            "* c",
            "",
            "Date: May 11, 2025",
            "* c2",
            "",
            "Date: May 14, 2025",
            "* d",
            "",
            "Date: May 28, 2025",
            "* e",
            "Date: Jun 15, 2025",
            "* f",
        ]
    )
    assert annotate_observations(text, NOW) == "\n".join(
        [
            "Date: Apr 1, 2025",
            "* a",
            "",
            "Date: May 10, 2025",
            "* b",
            "",
            "Date: May 11, 2025",
            "* c",
            "",
            "Date: May 11, 2025",
            "* c2",
            "",
            "Date: May 14, 2025",
            "* d",
            "",
            "Date: May 28, 2025",
            "* e",
            "Date: Jun 15, 2025 (today)",
            "* f",
        ]
    )


@pytest.mark.parametrize(
    ("line", "gap"),
    [
        ("[2 days later]", True),
        ("  [1 week later] ", True),
        ("[4 weeks later]", True),
        ("[1 month later]", True),
        ("[15 months later]", True),
        ("[1 day later]", False),  # a one-day step was never written as a gap line
        ("[2 years later]", False),
        ("* [3 days later] we met", False),
    ],
)
def test_is_gap_line(line: str, gap: bool) -> None:
    """Gap lines an older version wrote between date headers are recognised (and dropped)."""
    assert is_gap_line(line) is gap


def test_an_only_old_header_is_still_the_anchor() -> None:
    text = "Date: Jan 3, 2024\n* a\n\nDate: Jan 9, 2024\n* b"
    assert annotate_observations(text, NOW) == "Date: Jan 3, 2024\n* a\n\nDate: Jan 9, 2024 (1 year ago)\n* b"


def test_a_gap_line_written_by_an_earlier_version_is_dropped() -> None:
    text = "Date: Jun 1, 2025 (2 weeks ago)\n* a\n\n[1 week later]\n\nDate: Jun 10, 2025\n* b"
    assert annotate_observations(text, NOW) == (
        "Date: Jun 1, 2025 (2 weeks ago)\n* a\n\nDate: Jun 10, 2025 (5 days ago)\n* b"
    )


def test_boundary_lines_pass_through() -> None:
    boundary = boundary_line(datetime(2025, 6, 1, 9, 30, tzinfo=timezone.utc))
    text = f"Date: Jun 1, 2025\n* a (meaning June 1, 2025)\n\n{boundary}\n\nDate: Jun 10, 2025\n* b"
    out = annotate_observations(text, NOW)
    assert boundary in out.split("\n")
    assert out == (
        "Date: Jun 1, 2025 (2 weeks ago)\n* a (meaning June 1, 2025 - 2 weeks ago)\n\n"
        f"{boundary}\n\nDate: Jun 10, 2025 (5 days ago)\n* b"
    )


SAMPLE = """Date: May 20, 2025
* 🔴 (09:00) User will fly to Rome (meaning May 30, 2025).
* 🟡 (09:05) User likes pasta
Date: Jun 10, 2025
* ✅ (10:00) Booked hotel (estimated mid June 2025)
  * detail

--- message boundary (2025-06-10T10:00:00+00:00) ---

Date: Jun 14, 2025
* (11:00) Asked about trains (meaning Jun 20, 2025)"""


def test_annotation_is_idempotent() -> None:
    once = annotate_observations(SAMPLE, NOW)
    assert annotate_observations(once, NOW) == once
    assert "later]" not in once
    assert once.count("Date: May 20, 2025\n") == 1  # older than two weeks and not the newest
    assert once.count("(5 days ago)") == 1 and once.count("(yesterday)") == 1
    assert once.count(" - 2 weeks ago") == 1


def test_reannotation_refreshes_against_the_new_now() -> None:
    later_now = NOW + timedelta(days=30)
    assert annotate_observations(annotate_observations(SAMPLE, NOW), later_now) == annotate_observations(
        SAMPLE, later_now
    )


def test_unknown_header_suffix_is_left_alone() -> None:
    assert annotate_observations("Date: Jun 14, 2025 (travel day)\n* a", NOW) == (
        "Date: Jun 14, 2025 (travel day)\n* a"
    )


def test_literal_gap_like_text_not_before_a_header_is_kept() -> None:
    text = "Date: Jun 14, 2025\n* a\n[3 days later]\n* b"
    assert annotate_observations(text, NOW) == "Date: Jun 14, 2025 (yesterday)\n* a\n[3 days later]\n* b"


def test_annotation_is_linear_on_a_large_log() -> None:
    """100k lines: a quadratic pass would not finish; no wall-clock assertion."""
    start = date(2020, 1, 1)
    lines: list[str] = []
    for group in range(20_000):
        day = start + timedelta(days=group * 2)
        lines.append(f"Date: {day:%b} {day.day}, {day.year}")
        lines.append(f"* 🔴 (09:00) User will go (meaning {day:%B} {day.day}, {day.year}).")
        lines.extend(["* 🟡 (09:01) detail line", "* (meaning (meaning (meaning", ""])
    text = "\n".join(lines)
    out = annotate_observations(text, datetime(2200, 1, 1))
    assert out.count("likely already happened") == 20_000
    assert out.count(" ago)") == 1  # the newest header only: the rest are years old


# --- optimize_for_context ---------------------------------------------------------------------


BOUNDARY = "--- message boundary (2025-06-15T12:00:00+00:00) ---"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("* 🔴 [O12] User moved", "* 🔴 User moved"),
        ("* [O12-N3] child", "* child"),
        ("* 🟡 (09:00) medium", "* (09:00) medium"),
        ("* 🟢 low", "* low"),
        ("* ✅ done", "* ✅ done"),
        # Bracketed text is content (issue 12, item 5; main deleted every "[...]" here).
        ("* [tag] text [another label]", "* [tag] text [another label]"),
        ("* 🔴 User's ticket [A-123] blocks tasks [1, 2, 3]", "* 🔴 User's ticket [A-123] blocks tasks [1, 2, 3]"),
        ("* 🟡 Shortlist: [Pestana Vintage, Casa do Rio]", "* Shortlist: [Pestana Vintage, Casa do Rio]"),
        ("* [O4] Photo [photo: beach.jpg] sent", "* Photo [photo: beach.jpg] sent"),
        ("* see [docs](https://example.com/x)", "* see [docs](https://example.com/x)"),
        ("* [12 items collapsed: a, b]", "* [12 items collapsed: a, b]"),
        ("* A -> B -> C", "* A B C"),
        ("  * -> follow-up  detail", "  * follow-up detail"),
        ("* trailing   ", "* trailing"),
        ("a\n\n\n\nb", "a\n\nb"),
        ("\n\na\n\n", "a"),
        ("[3 days later]", "[3 days later]"),
        ("  [2 weeks later]", "  [2 weeks later]"),
        (BOUNDARY, BOUNDARY),
        ("Date: Jun 15, 2025 (today)", "Date: Jun 15, 2025 (today)"),
    ],
)
def test_optimize_for_context(text: str, expected: str) -> None:
    assert optimize_for_context(text) == expected


def test_optimize_then_annotate_equals_annotate_then_optimize() -> None:
    noisy = SAMPLE.replace("User likes", "[O3] User -> likes").replace("Booked", "[pref] Booked")
    rendered = prepare_observations_for_context(noisy, NOW)
    assert rendered == optimize_for_context(annotate_observations(noisy, NOW))
    assert "(yesterday)" in rendered and " - 2 weeks ago" in rendered
    assert "🟡" not in rendered and "[O3]" not in rendered and "->" not in rendered
    assert prepare_observations_for_context(rendered, NOW) == rendered


# --- strip_thread_tags ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<thread id="t1">\n* a\n</thread>', "* a"),
        ("<thread id='t1'>* a</thread>", "* a"),
        ("<thread>* a</thread>", "* a"),
        ('<THREAD ID="t1">* a</Thread >', "* a"),
        ('<thread id="t1">\n* a\n</thread>\n<thread id="t2">\n* b\n</thread>', "* a\n\n\n* b"),
        ("* no tags here", "* no tags here"),
        ("<threads>* a</threads>", "<threads>* a</threads>"),
        ('<thread id="t1">* unclosed', "* unclosed"),
        ("<thread id=\"t1\" * broken", "<thread id=\"t1\" * broken"),
    ],
)
def test_strip_thread_tags(text: str, expected: str) -> None:
    assert strip_thread_tags(text) == expected


def test_strip_thread_tags_is_linear_on_unterminated_tags() -> None:
    """Many ``<thread`` openings without ``>`` would make a naive ``[^>]*`` regex quadratic."""
    hostile = "<thread id=x " * 100_000
    assert strip_thread_tags(hostile) == hostile.strip()
    wrapped = '<thread id="t">* line</thread>\n' * 100_000
    assert strip_thread_tags(wrapped) == "\n".join(["* line"] * 100_000)
