"""Degenerate-output detection: true loops are caught, faithful repetitive summaries are not."""

from __future__ import annotations

import random

import pytest

from obsmem.om.llm.degenerate import MIN_LENGTH, degeneracy_report, is_degenerate

BLOCK = [
    "* 🔴 (14:30) User stated they are planning a trip to Lisbon in May",
    "* 🟡 (14:31) Assistant suggested three hotels near Alfama with sea views",
    "  * -> Hotel Memmo Alfama: rooftop pool, 180 EUR per night",
    "* 🟡 (14:32) User asked about tram 28 schedules and ticket prices",
    "* 🟢 (14:33) User mentioned they might bring their partner along",
]
LONG_LINE = "* 🟡 (10:00) Assistant ran the database migration script and it finished with no errors at all"
BUILD = "- execute_command `pnpm build` → ok"
TEST = "- execute_command `pnpm test` → 42 passed"


def _normal_observations(count: int) -> str:
    lines = ["Date: Jun 15, 2025"]
    for i in range(count):
        lines.append(
            f"* 🟡 ({9 + i // 60:02d}:{i % 60:02d}) Observation {i}: user discussed topic {i * 7 % 13} "
            f"with detail {i * 31 % 97}"
        )
    return "\n".join(lines)


def _random_line(length: int) -> str:
    rng = random.Random(7)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ,.") for _ in range(length))


DEGENERATE = {
    "5-line block repeated 20x": "\n".join(BLOCK * 20),
    "80+-char line repeated 300x": "\n".join([LONG_LINE] * 300),
    "tight loop inside one line": "The user said hello. " * 300,
    "single character run": "x" * 5000,
    "period aliasing the sample step": "abcdefghijk" * 500,
    "3-line cycle of short lines": "\n".join(["pnpm build → ok", "pnpm lint → ok", "pnpm test → ok"] * 100),
    "loop after real content": _normal_observations(20) + "\n" + "\n".join(BLOCK * 30),
    "21-line block repeated 62x": "\n".join(
        [f"* 🟡 (11:{i:02d}) Step {i} of the deployment checklist was reviewed again" for i in range(21)] * 62
    ),
}

OBSERVATION = "* 🔴 (09:01) User stated they live in Munich with their partner Alex."  # 68 chars: "short"

# Issue 12, item 4: loops of whole observation lines, each line short enough to pass for a
# faithful repeat of tool output before, were committed.
DEGENERATE.update(
    {
        "observation line x300": "\n".join([OBSERVATION] * 300),
        "observation line x2000 in a block": "<observations>\nDate: Jun 15, 2025\n"
        + "\n".join([OBSERVATION] * 2000)
        + "\n</observations>",
        "two observation lines alternating x150": "\n".join(
            [OBSERVATION, "* 🟡 (09:02) User asked how step 3 of the migration plan works."] * 150
        ),
        "priority line without a time x300": "\n".join(
            ["* 🟡 Assistant suggested the hotel near Alfama."] * 300
        ),
        "long line whose minute counts up x100": "\n".join(
            f"* 🟡 (10:{i % 60:02d}) {LONG_LINE.split(') ', 1)[1]}" for i in range(100)
        ),
    }
)

NOT_DEGENERATE = {
    "empty": "",
    "short loop under the minimum length": "abc" * 600,
    "200x short tool line": "\n".join(["pnpm build → ok"] * 200),
    "normal long observations": _normal_observations(300),
    "giant single line without repetition": _random_line(60_000),
    "giant single line of numbers": ",".join(str(i) for i in range(15_000)),
    "observations with short repeated bullets": "\n".join(
        f"* 🟡 (10:{i % 60:02d}) Ran test suite for module {i}\n  * ✅ done" for i in range(120)
    ),
}
NOT_DEGENERATE.update(
    {
        "a build log with times, one line a minute": "\n".join(
            f"* 🟡 ({9 + i // 60:02d}:{i % 60:02d}) Ran `pnpm build` → ok" for i in range(200)
        ),
        "one daily event over sixty days": "\n\n".join(
            f"Date: {month} {day}, 2025\n* 🟡 (09:00) User attended the daily standup of the data team"
            for month in ("Jun", "Jul")
            for day in range(1, 31)
        ),
        "a short tool line in two cases x300": "\n".join(
            ["PNPM BUILD → OK", "pnpm build → ok"] * 150
        ),
    }
)
for _runs in (100, 150, 200, 250, 300):
    NOT_DEGENERATE[f"alternating tool lines x{_runs}"] = "\n".join([BUILD, TEST] * _runs)
    NOT_DEGENERATE[f"runs of tool lines x{_runs}"] = "\n".join([BUILD] * _runs + [TEST] * _runs + [BUILD] * _runs)


@pytest.mark.parametrize("text", DEGENERATE.values(), ids=DEGENERATE.keys())
def test_loops_are_degenerate(text: str) -> None:
    assert len(text) >= MIN_LENGTH
    assert is_degenerate(text)
    assert degeneracy_report(text)


@pytest.mark.parametrize("text", NOT_DEGENERATE.values(), ids=NOT_DEGENERATE.keys())
def test_faithful_output_is_not_degenerate(text: str) -> None:
    assert not is_degenerate(text)
    assert degeneracy_report(text) is None


def test_anything_under_2000_chars_is_never_degenerate() -> None:
    assert not is_degenerate("x" * (MIN_LENGTH - 1))
    assert not is_degenerate("\n".join([LONG_LINE] * 20)[: MIN_LENGTH - 1])


def test_report_names_the_rule() -> None:
    assert "duplicate lines" in (degeneracy_report("\n".join([LONG_LINE] * 300)) or "")
    assert "windows" in (degeneracy_report("The user said hello. " * 300) or "")


def test_short_lines_repeated_far_apart_are_not_explained() -> None:
    # Period 5 is not "a command repeating": the same short lines in a 5-line cycle are a loop.
    cycle = ["ok one", "ok two", "ok three", "ok four", "ok five"]
    assert is_degenerate("\n".join(cycle * 100))


@pytest.mark.parametrize(("length", "expected"), [(60, False), (79, False), (80, True), (120, True)])
def test_repeated_single_line_boundary_is_80_chars(length: int, expected: bool) -> None:
    line = ("- execute_command `make all` finished with status ok " * 3)[:length]
    assert len(line.strip()) == length
    assert is_degenerate("\n".join([line] * 300)) is expected


# --- line identity: near-duplicates -----------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [
        "* 🔴 (11:42) User stated they live in Munich with their partner Alex.",  # another time
        "- 🟡 (09:01) User stated they live in Munich with their partner Alex.",  # marker, priority
        "* 🔴 (09:01)   user stated they live in MUNICH with their partner Alex.",  # case, spacing
    ],
)
def test_near_duplicates_count_as_duplicates(variant: str) -> None:
    # Long enough (>= 80 chars) that no repeat is explained: only the duplicate-line rule decides.
    tail = " They mentioned it again while talking about schools."
    lines = [OBSERVATION + tail if i % 2 == 0 else variant + tail for i in range(40)]
    report = degeneracy_report("\n".join(lines))
    assert report == "duplicate lines: 39 of 40 counted lines repeat"


def test_the_same_words_under_another_date_are_not_duplicates() -> None:
    days = [f"Date: Jun {day}, 2025\n{LONG_LINE}" for day in range(1, 29)]
    assert degeneracy_report("\n".join(days)) is None


# --- explained repeats are bounded by the input -------------------------------------------------

MINUTES_COUNTING_UP = "\n".join(
    f"* 🔴 ({9 + i // 60:02d}:{i % 60:02d}) User stated they live in Munich." for i in range(300)
)


@pytest.mark.parametrize(
    ("text", "input_lines", "expected"),
    [
        pytest.param("\n".join([BUILD, TEST] * 150), 400, False, id="300 tool lines from 400 input lines"),
        pytest.param("\n".join([BUILD, TEST] * 150), 12, True, id="300 tool lines from 12 input lines"),
        pytest.param("\n".join(["pnpm build → ok"] * 200), 250, False, id="200 builds from 250 lines"),
        pytest.param("\n".join(["pnpm build → ok"] * 200), 30, True, id="200 builds from 30 lines"),
        pytest.param(MINUTES_COUNTING_UP, 400, False, id="a statement, minute counting up, from 400 lines"),
        pytest.param(MINUTES_COUNTING_UP, 40, True, id="a statement, minute counting up, from 40 lines"),
    ],
)
def test_explained_repeats_are_bounded_by_the_input(text: str, input_lines: int, expected: bool) -> None:
    assert is_degenerate(text, input_lines=input_lines) is expected
    # Without the input's size the text alone decides: each of these is a faithful-looking
    # short repeat, which a long enough input would explain.
    assert not is_degenerate(text)


@pytest.mark.parametrize("text", NOT_DEGENERATE.values(), ids=NOT_DEGENERATE.keys())
def test_faithful_output_of_a_long_enough_input_is_not_degenerate(text: str) -> None:
    assert not is_degenerate(text, input_lines=len(text.splitlines()))
