"""The retention metric's normalisation, as a table: what counts as the same answer."""

from __future__ import annotations

import pytest

from obsmem.bench.normalize import answer_tokens, context_tokens, normalise_dates, token_recall


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7 May 2023", " 2023-05-07 "),
        ("May 7, 2023", " 2023-05-07 "),
        ("May 7 2023", " 2023-05-07 "),
        ("7th of May, 2023", " 2023-05-07 "),
        ("2023-05-07", " 2023-05-07 "),
        ("2023/5/7", " 2023-05-07 "),
        ("Sept. 3, 2022", " 2022-09-03 "),
        ("June 2023", " 2023-06 "),
        ("in June, 2023 we met", "in  2023-06  we met"),
        ("2023-13-40", "2023-13-40"),  # not a date: left alone
        ("may I ask", "may i ask"),  # the verb is not a month
    ],
)
def test_dates_become_one_iso_form(text: str, expected: str) -> None:
    assert normalise_dates(text) == expected


@pytest.mark.parametrize(
    ("answer", "tokens"),
    [
        ("Adoption agencies", ["adoption", "agency"]),
        ("The Saturday before 25 May 2023", ["saturday", "2023-05-25"]),
        ("two kids", ["2", "kid"]),
        ("10 years ago", ["10", "year", "ago"]),
        ("the 3rd time", ["3", "time"]),
        ('"Charlotte\'s Web"', ["charlotte", "web"]),
        ("Bach and Mozart", ["bach", "mozart"]),
        ("glass", ["glass"]),  # a double s is not a plural
        ("No", []),  # nothing a context could be checked for
        ("dishes, boxes", ["dish", "box"]),
    ],
)
def test_answer_tokens(answer: str, tokens: list[str]) -> None:
    assert answer_tokens(answer) == tokens


def test_a_full_date_in_the_context_also_holds_its_month() -> None:
    context = context_tokens(["We met on June 18, 2023 at the lake."])
    assert {"2023-06-18", "2023-06", "lake"} <= context
    assert token_recall(answer_tokens("June 2023"), context) == 1.0
    assert token_recall(answer_tokens("July 2023"), context) == 0.0


def test_recall_is_the_share_of_answer_tokens_present() -> None:
    context = context_tokens(["Melanie plays the clarinet."])
    assert token_recall(answer_tokens("clarinet and violin"), context) == 0.5
    assert token_recall([], context) == 1.0
