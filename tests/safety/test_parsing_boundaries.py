"""Parsing observer and reflector output at its edges (public functions of ``om/llm/parsing``).

Output cut off at the token limit, sections a model put in the wrong place, nested bullets that
carry anchor ids, JSON values that are strings, booleans or null, CRLF line ends.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.om.extractors import Extractor
from obsmem.om.llm.parsing import (
    TRUNCATION_SUFFIX,
    parse_observer_output,
    parse_reflector_output,
    strip_anchor_ids,
    truncate_long_lines,
)

BUDGET = Extractor(name="budget", instructions="The trip budget as JSON.")
PREFS = Extractor(name="preferences", instructions="The user's preferences.")


# --------------------------------------------------------------------------------------------
# Output cut off
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("parse", [parse_observer_output, parse_reflector_output])
def test_a_trailing_section_cut_off_at_the_limit_runs_to_the_end(parse: Any) -> None:
    parsed = parse("<observations>\n* 🔴 (09:00) fact\n</observations>\n<current-task>\nfinish the migr")
    assert parsed.current_task == "finish the migr"
    assert parsed.observations == "* 🔴 (09:00) fact"


def test_an_unclosed_observations_block_is_a_block_with_everything_after_it() -> None:
    parsed = parse_observer_output("Notes:\n<observations>\nUser moved to Berlin in May.\n* 🔴 (09:00) fact")
    assert parsed.found_block
    assert parsed.observations == "User moved to Berlin in May.\n* 🔴 (09:00) fact"


def test_a_closing_tag_mentioned_before_the_section_is_not_its_end() -> None:
    text = (
        "<observations>\n* 🟡 (09:00) User pasted a stray </current-task> tag\n</observations>\n"
        "<current-task>\nreal task\n</current-task>"
    )
    assert parse_observer_output(text).current_task == "real task"


# --------------------------------------------------------------------------------------------
# Sections and values inside the observations block
# --------------------------------------------------------------------------------------------


def test_extracted_values_inside_the_observations_block_are_memory_not_values() -> None:
    # Changed by issue 13, item 3: values inside the block used to be read and removed, so text
    # the model copied from a user or a tool could set them. Only top-level sections are read
    # now; inside the block the line stays memory, defused, and the lines around it are kept.
    text = (
        "<observations>\n* 🔴 (09:00) User set a budget.\n"
        '<extracted-values>{"budget": {"max": 900}}</extracted-values>\n'
        "* 🟡 (09:01) User asked about hotels.\n</observations>"
    )
    parsed = parse_observer_output(text, [BUDGET])
    assert parsed.extracted == {}
    assert parsed.extraction_failures == {}
    kept = [line for line in parsed.observations.split("\n") if line.strip()]
    assert kept == [
        "* 🔴 (09:00) User set a budget.",
        '&lt;extracted-values>{"budget": {"max": 900}}&lt;/extracted-values>',
        "* 🟡 (09:01) User asked about hotels.",
    ]


def test_a_later_extracted_values_block_answers_what_an_earlier_one_could_not() -> None:
    text = (
        "<observations>\n* x\n</observations>\n"
        "<extracted-values>[1, 2]</extracted-values>\n"
        '<extracted-values>{"budget": 12}</extracted-values>'
    )
    parsed = parse_observer_output(text, [BUDGET, PREFS])
    assert parsed.extracted == {"budget": 12}
    assert set(parsed.extraction_failures) == {"preferences"}
    assert "must hold a JSON object" in parsed.extraction_failures["preferences"]


def test_an_extractor_named_like_the_observations_block_never_consumes_it() -> None:
    shadow = Extractor(name="observations", instructions="not allowed, but must not break parsing")
    parsed = parse_observer_output("<observations>\n* 🔴 (09:00) fact\n</observations>", [shadow])
    assert parsed.observations == "* 🔴 (09:00) fact"
    assert parsed.extracted == {}


@pytest.mark.parametrize(
    ("value_text", "expected"),
    [
        ('"window seat"', "window seat"),
        ("false", False),
        ("null", None),
        ("1e3", 1000.0),
        ("2E2", 200.0),
        ("-7", -7),
        ("12 euros", "12 euros"),
    ],
)
def test_inline_values_decode_json_scalars(value_text: str, expected: Any) -> None:
    parsed = parse_observer_output(f"<observations>\n* x\n</observations>\n<budget>{value_text}</budget>", [BUDGET])
    assert parsed.extracted == {"budget": expected}


# --------------------------------------------------------------------------------------------
# The list-item fallback
# --------------------------------------------------------------------------------------------


def test_fallback_keeps_date_groups_apart_and_items_together() -> None:
    text = (
        "Here you go.\nDate: Jun 15, 2025\n* 🔴 (09:00) a\n* 🟡 (09:05) b\nSome prose.\n"
        "Date: Jun 16, 2025\n* 🔴 (10:00) c\n* 🟡 (10:05) d"
    )
    parsed = parse_observer_output(text)
    assert not parsed.found_block
    assert parsed.observations == (
        "Date: Jun 15, 2025\n* 🔴 (09:00) a\n* 🟡 (09:05) b\n\nDate: Jun 16, 2025\n* 🔴 (10:00) c\n* 🟡 (10:05) d"
    )


# --------------------------------------------------------------------------------------------
# Line hygiene: anchors, long lines, CRLF
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  * [O3] nested child", "  * nested child"),  # the nesting indent stays
        ("    * -> [O12] deeper", "    * -> deeper"),
        ("* fact [O3]", "* fact"),
        ("* [O1] a\n  * [O2] b", "* a\n  * b"),
    ],
)
def test_anchor_ids_are_stripped_and_nested_bullets_keep_their_indent(text: str, expected: str) -> None:
    assert strip_anchor_ids(text) == expected


def test_nested_anchored_bullets_survive_parsing() -> None:
    parsed = parse_reflector_output("<observations>\n* [O1] 🔴 (09:00) parent\n  * [O2] -> child\n</observations>")
    assert parsed.observations == "* 🔴 (09:00) parent\n  * -> child"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abc", 3, "abc"),  # exactly at the limit: kept whole
        ("abcd", 3, "abc" + TRUNCATION_SUFFIX),
        ("ab\nabcd", 3, "ab\nabc" + TRUNCATION_SUFFIX),
    ],
)
def test_truncate_long_lines_table(text: str, limit: int, expected: str) -> None:
    assert truncate_long_lines(text, limit=limit) == expected


def test_crlf_inside_a_multiline_section_becomes_lf() -> None:
    parsed = parse_observer_output(
        "<observations>\r\n* x\r\n</observations>\r\n<current-task>\r\nstep one\r\nstep two\r\n</current-task>\r\n"
    )
    assert parsed.current_task == "step one\nstep two"
