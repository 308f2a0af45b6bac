"""Previous-observation truncation for the observer prompt (§6.3, §9.13 items 70-71)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem.om.text.format import boundary_line, format_date_header, is_boundary_line, parse_date_header
from obsmem.om.text.truncation import (
    TRUNCATION_NOTICE,
    TruncationResult,
    replace_reflected_prefix,
    truncate_previous_observations,
    truncation_notice,
)


def count_tokens(text: str) -> int:
    """A tokenizer-independent stand-in: about four characters per token."""
    return max(1, len(text) // 4)


def make_log(
    priorities: list[str], start: date = date(2025, 6, 1), per_day: int = 5, words: str = "with a few details"
) -> str:
    """One line per priority, ``per_day`` lines per date group."""
    groups: list[str] = []
    for first in range(0, len(priorities), per_day):
        day = start + timedelta(days=first // per_day)
        body = [
            f"* {prio} ({9 + i % 10:02d}:{i % 60:02d}) Observation {first + i} {words}".replace("*  (", "* (")
            for i, prio in enumerate(priorities[first : first + per_day])
        ]
        groups.append("\n".join([format_date_header(day), *body]))
    return "\n\n".join(groups)


def observation_lines(text: str) -> list[str]:
    return [
        line
        for line in text.split("\n")
        if line.strip()
        and not is_boundary_line(line)
        and parse_date_header(line) is None
        and not TRUNCATION_NOTICE.fullmatch(line)
    ]


def notice_counts(text: str) -> list[int]:
    return [int(m[1]) for line in text.split("\n") if (m := TRUNCATION_NOTICE.fullmatch(line))]


def _with_headers(text: str) -> list[tuple[str, date | None]]:
    """Observation lines paired with the date header they sit under."""
    current: date | None = None
    pairs: list[tuple[str, date | None]] = []
    visible = set(observation_lines(text))
    for line in text.split("\n"):
        current = parse_date_header(line) or current
        if line in visible:
            pairs.append((line, current))
    return pairs


def assert_well_formed(original: str, result: TruncationResult) -> None:
    """Visible lines keep their order and headers; notices account for every hidden line."""
    kept = _with_headers(result.text)
    remaining = iter(_with_headers(original))
    assert all(pair in remaining for pair in kept), "visible lines lost their order or their header"
    counts = notice_counts(result.text)
    assert sum(counts) == result.hidden_lines
    total = len(observation_lines(original))
    if result.text != truncation_notice(total):  # a lone line may hide only in the "nothing fits" case
        assert all(count >= 2 for count in counts), "a single hidden line is shown, not noticed"
    assert len(kept) + sum(counts) == total
    lines = [line for line in result.text.split("\n") if line.strip()]
    for before, after in zip(lines, lines[1:], strict=False):
        assert not (TRUNCATION_NOTICE.fullmatch(before) and TRUNCATION_NOTICE.fullmatch(after)), (
            "two notices in a row: one hidden run was reported twice"
        )


# --- the easy cases ---------------------------------------------------------------------------


def test_no_budget_means_no_truncation() -> None:
    log = make_log(["🟡"] * 200)
    assert truncate_previous_observations(log, None, count_tokens) == TruncationResult(log, False, 0)


def test_within_budget_is_unchanged() -> None:
    log = make_log(["🟡"] * 3)
    result = truncate_previous_observations(log, count_tokens(log), count_tokens)
    assert result == TruncationResult(log, False, 0)


@pytest.mark.parametrize(("text", "truncated", "hidden"), [(make_log(["🔴"] * 4), True, 4), ("", False, 0)])
def test_zero_budget_is_empty(text: str, truncated: bool, hidden: int) -> None:
    assert truncate_previous_observations(text, 0, count_tokens) == TruncationResult("", truncated, hidden)


def test_nothing_fits_gives_only_the_notice() -> None:
    log = make_log(["🔴"] * 30)
    result = truncate_previous_observations(log, 3, count_tokens)
    assert result == TruncationResult("[30 observations truncated here]", True, 30)


def test_single_observation_over_budget() -> None:
    log = make_log(["🔴"])
    assert truncate_previous_observations(log, 5, count_tokens).text == "[1 observation truncated here]"


def test_only_headers_over_budget() -> None:
    text = "Date: Jun 1, 2025\n\nDate: Jun 2, 2025"
    assert truncate_previous_observations(text, 1, count_tokens) == TruncationResult("", True, 0)


# --- §9.13 items 70-71 ------------------------------------------------------------------------


def test_two_hundred_token_budget() -> None:
    priorities = ["🔴" if i % 7 == 3 else ("✅" if i % 11 == 5 else "🟡") for i in range(120)]
    log = make_log(priorities)
    assert count_tokens(log) > 1_000
    result = truncate_previous_observations(log, 200, count_tokens)
    assert result.truncated
    assert count_tokens(result.text) <= 200
    assert_well_formed(log, result)
    visible = observation_lines(result.text)
    assert visible[-1] == observation_lines(log)[-1], "the newest observation is always kept"
    older_important = [line for line in visible[:-5] if "🔴" in line or "✅" in line]
    assert older_important, "important older lines survive"
    assert result.text.startswith("Date: Jun 1, 2025\n[")  # the oldest run hides behind a dated notice


def test_one_hidden_run_gives_exactly_one_notice() -> None:
    log = make_log(["🟡"] * 80)
    result = truncate_previous_observations(log, 200, count_tokens)
    assert notice_counts(result.text) == [result.hidden_lines]
    assert result.text.count("truncated here") == 1
    assert result.text.startswith(f"Date: Jun 1, 2025\n{truncation_notice(result.hidden_lines)}\n\nDate: ")
    assert_well_formed(log, result)


def test_more_important_lines_win_over_a_longer_tail() -> None:
    log = make_log(["🔴"] * 20 + ["🟡"] * 20)
    result = truncate_previous_observations(log, 150, count_tokens)
    assert_well_formed(log, result)
    visible = observation_lines(result.text)
    important = [line for line in visible if "🔴" in line]
    tail = [line for line in visible if "🟡" in line]
    assert important, "with room for a few lines, some important ones are kept"
    assert len(important) <= len(tail), "older important lines kept never outnumber the tail"
    # every 🟡 line kept is part of the contiguous newest tail
    assert tail == observation_lines(log)[-len(tail) :]


def test_a_single_hidden_line_is_shown_as_is() -> None:
    """Between the two kept 🔴 lines only ``y`` would be hidden; a notice would cost as much."""
    filler = [f"* 🟡 (09:0{i}) filler {i} ........" for i in range(4)]
    tail_filler = [f"* 🟡 (10:0{i}) later {i} ........." for i in range(6)]
    middle = ["* 🔴 (09:10) A important ....", "* 🟡 (09:11) y in between ...", "* 🔴 (09:12) B important ...."]
    newest = "* 🟡 (11:00) the newest one ......"
    log = "\n".join([*filler, *middle, *tail_filler, newest])
    expected = "\n".join([truncation_notice(4), *middle, truncation_notice(5), tail_filler[-1], newest])
    result = truncate_previous_observations(log, count_tokens(expected), count_tokens)
    assert result == TruncationResult(expected, True, 9)


def test_layout_headers_boundaries_and_notice_placement() -> None:
    """Headers only where something is shown; a notice sits under its first hidden line's date;
    a boundary survives only between shown content."""
    at = datetime(2025, 6, 3, 12, tzinfo=timezone.utc)
    first = make_log(["🟡"] * 14 + ["🔴"], start=date(2025, 6, 1))
    second = make_log(["🟡"] * 2 + ["🔴"] + ["🟡"] * 12, start=date(2025, 6, 4))
    log = f"{first}\n\n{boundary_line(at)}\n\n{second}"
    result = truncate_previous_observations(log, 200, count_tokens)
    tail = "\n".join(f"* 🟡 ({9 + i:02d}:{i:02d}) Observation {5 + i} with a few details" for i in range(5))
    tail2 = "\n".join(f"* 🟡 ({9 + i:02d}:{i:02d}) Observation {10 + i} with a few details" for i in range(5))
    assert result.text == (
        "Date: Jun 1, 2025\n"
        "[14 observations truncated here]\n"
        "\n"
        "Date: Jun 3, 2025\n"
        "* 🔴 (13:04) Observation 14 with a few details\n"
        "\n"
        f"{boundary_line(at)}\n"
        "\n"
        "Date: Jun 4, 2025\n"
        "[2 observations truncated here]\n"
        "* 🔴 (11:02) Observation 2 with a few details\n"
        "[2 observations truncated here]\n"
        "\n"
        "Date: Jun 5, 2025\n"
        f"{tail}\n"
        "\n"
        "Date: Jun 6, 2025\n"
        f"{tail2}"
    )
    assert result.hidden_lines == 18
    assert_well_formed(log, result)


def test_boundary_inside_a_hidden_run_is_dropped() -> None:
    at = datetime(2025, 6, 3, 12, tzinfo=timezone.utc)
    log = f"{make_log(['🟡'] * 15)}\n\n{boundary_line(at)}\n\n{make_log(['🟡'] * 15, start=date(2025, 6, 4))}"
    result = truncate_previous_observations(log, 100, count_tokens)
    assert not any(is_boundary_line(line) for line in result.text.split("\n"))
    assert_well_formed(log, result)


def test_stored_text_is_not_modified() -> None:
    log = make_log(["🔴", "🟡"] * 30)
    copy = str(log)
    truncate_previous_observations(log, 100, count_tokens)
    assert log == copy


def test_search_counts_tokens_a_logarithmic_number_of_times() -> None:
    """O(n log n): each probe renders once, and there are O(log n) probes."""
    calls = 0

    def counting(text: str) -> int:
        nonlocal calls
        calls += 1
        return count_tokens(text)

    size = 20_000
    log = make_log(["🔴" if i % 9 == 0 else "🟡" for i in range(size)])
    result = truncate_previous_observations(log, 2_000, counting)
    assert count_tokens(result.text) <= 2_000
    assert calls <= 2 * math.ceil(math.log2(size)) + 4


# --- property ---------------------------------------------------------------------------------

_line = st.tuples(
    st.sampled_from(["🔴", "🟡", "🟢", "✅", ""]),
    st.integers(min_value=0, max_value=2),  # 0: same day, 1: next day, 2: boundary then next day
    st.text(alphabet="abcdefghij klm", min_size=0, max_size=40),
    st.booleans(),  # child line
)


def _build(entries: list[tuple[str, int, str, bool]]) -> str:
    day = date(2025, 1, 1)
    out = [format_date_header(day)]
    for prio, step, words, child in entries:
        if step:
            day += timedelta(days=1)
            if step == 2:
                at = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
                out += ["", boundary_line(at), ""]
            out += ["", format_date_header(day)]
        out.append(("  * " if child else "* ") + (f"{prio} " if prio else "") + f"(10:00) x{words}")
    return "\n".join(out)


@pytest.mark.parametrize("counter", [count_tokens, lambda s: len(s.split()) + s.count("\n")])
@settings(max_examples=150, deadline=None)
@given(entries=st.lists(_line, min_size=1, max_size=60), budget=st.integers(min_value=0, max_value=400))
def test_result_always_fits_the_budget_or_is_only_the_notice(
    counter: Callable[[str], int], entries: list[tuple[str, int, str, bool]], budget: int
) -> None:
    log = _build(entries)
    result = truncate_previous_observations(log, budget, counter)
    total = len(observation_lines(log))
    if budget == 0:
        assert result.text == ""
        return
    if not result.truncated:
        assert result.text == log and counter(log) <= budget
        return
    assert counter(result.text) <= budget or result.text == truncation_notice(total)
    assert_well_formed(log, result)


# --- replace_reflected_prefix (§6.3 step 1) ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reflection", "count", "expected"),
    [
        ("a\nb\nc\nd", "R", 2, "R\n\nc\nd"),
        ("a\nb\n\nc", "R", 2, "R\n\nc"),
        ("a\nb", "R", 2, "R"),
        ("a\nb", "R", 10, "R"),
        ("a\nb", "R\n", 1, "R\n\nb"),
        ("a\nb", "R", 0, "a\nb"),
        ("a\nb", "R", -1, "a\nb"),
        ("a\nb", "   ", 1, "a\nb"),
    ],
)
def test_replace_reflected_prefix(text: str, reflection: str, count: int, expected: str) -> None:
    assert replace_reflected_prefix(text, reflection, count) == expected
