"""Degenerate-output detection at the edges of its rules (table tests of the public functions).

The two rules of ``obsmem.om.llm.degenerate``: more than half of the counted lines (24+ chars,
not explained as a short period-1/2 repeat) are duplicates, or more than 40 % of about fifty
sampled 200-char windows recur elsewhere. Each case below sits on one edge of a rule: the exact
ratio, the exact count, the exact length, a loop after unrelated text, a blank line before a
loop. Texts are built so that only the rule under test can decide.
"""

from __future__ import annotations

import random
import string

import pytest

from obsmem.om.llm.degenerate import MIN_LENGTH, degeneracy_report, is_degenerate


def unique_text(length: int, seed: int = 1) -> str:
    """Text without repetition: random letters and spaces, one line."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_lowercase + "      ,.") for _ in range(length))


def loop_after_unique(length: int, loop_share: float, period: str = "abcdefghij") -> str:
    """One line: unique text, then a tight loop filling ``loop_share`` of ``length``."""
    loop_length = int(length * loop_share)
    loop = (period * (loop_length // len(period) + 2))[:loop_length]
    return unique_text(length - loop_length) + loop


def distinct_lines(count: int, length: int = 100, seed: int = 3) -> list[str]:
    """``count`` different lines of exactly ``length`` characters (never explained: >= 80 chars)."""
    rng = random.Random(seed)
    return ["* " + "".join(rng.choice(string.ascii_lowercase) for _ in range(length - 2)) for _ in range(count)]


def spread_order(kinds: int, steps: list[int]) -> list[int]:
    """Line kinds in rounds: round ``r`` visits every kind in steps of ``r`` (mod a prime ``kinds``).

    Each ordered pair of neighbours occurs once (within a round their difference is ``r``), so no
    200-char window recurs; and with ``r + r' != kinds`` between rounds no line equals either of
    the two before it, so none is explained as a period-1/2 repeat. Only the duplicate-line rule
    can see the repetition.
    """
    return [(i * r) % kinds for r in steps for i in range(kinds)]


def lines_text(kinds: int, steps: list[int], *, length: int = 100) -> str:
    pool = distinct_lines(kinds, length)
    return "\n".join(pool[k] for k in spread_order(kinds, steps))


# --------------------------------------------------------------------------------------------
# Length
# --------------------------------------------------------------------------------------------


def test_a_loop_of_exactly_the_minimum_length_is_degenerate() -> None:
    assert is_degenerate("x" * MIN_LENGTH)
    assert not is_degenerate("x" * (MIN_LENGTH - 1))


def test_only_the_kept_text_counts_towards_the_minimum_length() -> None:
    # 1800 chars of tight loop plus twenty short lines, each repeated at period one: the repeats
    # are explained and dropped, and what is kept (1920 chars) is under the minimum.
    loop = ("abcdefghij" * 180)[:1800]
    padding = "\n".join(f"ok {i:02d}\nok {i:02d}\nok {i:02d}" for i in range(20))
    text = f"{loop}\n{padding}"
    assert len(text) >= MIN_LENGTH
    assert degeneracy_report(text) is None


# --------------------------------------------------------------------------------------------
# The duplicate-line rule
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "steps", "expected"),
    [
        pytest.param(11, [1, 2], None, id="22 lines, exactly half duplicates: not a loop"),
        pytest.param(7, [1, 2, 3], "duplicate lines: 14 of 21 counted lines repeat", id="two thirds duplicates"),
        pytest.param(5, [1, 2, 3, 4], "duplicate lines: 15 of 20 counted lines repeat", id="exactly 20 lines"),
    ],
)
def test_duplicate_line_ratio_and_count(kinds: int, steps: list[int], expected: str | None) -> None:
    text = lines_text(kinds, steps)
    assert len(text) >= MIN_LENGTH
    assert degeneracy_report(text) == expected


def test_nineteen_counted_lines_are_too_few_for_the_line_rule() -> None:
    text = "\n".join(lines_text(5, [1, 2, 3, 4], length=110).split("\n")[:19])
    assert len(text) >= MIN_LENGTH
    assert degeneracy_report(text) is None


def test_one_repeated_line_among_many_is_not_a_loop() -> None:
    pool = distinct_lines(30)
    text = "\n".join([*pool[:15], pool[3], *pool[15:]])
    assert degeneracy_report(text) is None


def test_lines_of_exactly_24_chars_are_counted() -> None:
    # Eleven kinds of 24-char lines in an order whose neighbours never repeat: the windows do not
    # recur, so only the line rule (which counts lines from 24 chars) can see the loop.
    text = lines_text(11, [1, 2, 3, 4, 6, 7, 8, 9], length=24)
    assert len(text) >= MIN_LENGTH
    assert degeneracy_report(text) == "duplicate lines: 77 of 88 counted lines repeat"


def test_a_blank_line_does_not_end_the_scan() -> None:
    line = "* 🟡 (10:00) Assistant ran the database migration script and it finished with no errors at all"
    assert len(line) >= 80  # not a short tool line: its repeats are not explained
    loop = "\n".join([line] * 60)
    assert is_degenerate(f"Summary of the session:\n\n{loop}")
    assert is_degenerate(f"\n\n\n{loop}")


# --------------------------------------------------------------------------------------------
# The window rule
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "share", "expected"),
    [
        pytest.param(10_000, 0.40, None, id="exactly 40 % of windows recur: not a loop"),
        pytest.param(10_000, 0.42, "duplicate windows: 21 of 50 sampled windows recur", id="just over 40 %"),
        pytest.param(10_000, 0.20, None, id="a fifth of the text loops"),
        pytest.param(2000, 0.34, None, id="a third of a short text loops"),
        pytest.param(8000, 0.75, "duplicate windows: 36 of 49 sampled windows recur", id="loop after text"),
    ],
)
def test_loop_share_against_the_window_rule(length: int, share: float, expected: str | None) -> None:
    assert degeneracy_report(loop_after_unique(length, share)) == expected


def test_windows_are_sampled_over_the_whole_text_not_only_its_start() -> None:
    text = unique_text(1000) + "\n" + "The user said hello. " * 200
    assert is_degenerate(text)


def test_a_passage_written_twice_is_degenerate() -> None:
    passage = unique_text(1500, seed=2)
    assert is_degenerate(passage + passage + unique_text(1000, seed=5))


def test_one_recurring_passage_in_long_text_is_not_a_loop() -> None:
    quote = unique_text(600, seed=9)
    text = unique_text(6000, seed=4) + quote + unique_text(6000, seed=6) + quote
    assert degeneracy_report(text) is None
