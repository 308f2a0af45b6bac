"""Issue 15's stricter harness: -ed/-ing matching, yes/no, line-level units, the rare-word
baseline, the chance floor and the budget curve — on the tiny fixture, never the benchmark."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.bench.extractive import rare_word_context
from obsmem.bench.lines import context_units, find_unit
from obsmem.bench.locomo import load_locomo
from obsmem.bench.normalize import answer_tokens, context_tokens, is_yes_no, token_recall, verb_key
from obsmem.bench.retention import RetentionSettings
from obsmem.bench.run import run_curve, run_retention
from obsmem.cli import app
from obsmem.tokens import TokenCounter
from obsmem.types import Message

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "locomo-tiny.json"
SMALL = RetentionSettings(message_tokens=300, observation_tokens=600)
DAY = datetime(2024, 3, 3, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("words", "same"),
    [
        (("baked", "baking", "bake"), True),
        (("running", "run"), True),
        (("hopped", "hoping", "hope"), True),
        (("studied", "study"), True),
        (("painted", "painting", "paint"), True),
        (("speed", "spe"), False),  # -eed is not an -ed ending
        (("bake", "bike"), False),
        (("2023-05", "2023"), False),
    ],
)
def test_verb_forms_share_one_key(words: tuple[str, ...], same: bool) -> None:
    keys = {verb_key(word) for word in words}
    assert (len(keys) == 1) is same


def test_an_ing_answer_is_found_beside_its_ed_form() -> None:
    context = context_tokens(["She painted the fence and baked bread."])
    assert token_recall(answer_tokens("painting, baking"), context) == 1.0
    assert token_recall(answer_tokens("cooking"), context) == 0.0


@pytest.mark.parametrize(
    ("answer", "yes_no"),
    [("No", True), ("Yes, she did", True), ("Likely no", True), ("Nobody", False), ("Norway", False),
     ("7 May 2023", False)],  # fmt: skip
)
def test_yes_no_answers_are_recognised(answer: str, yes_no: bool) -> None:
    assert is_yes_no(answer) is yes_no


def test_units_are_observation_lines_with_their_date_and_whole_messages() -> None:
    observations = Message.system(
        "Date: Mar 3, 2024\n* 🔴 (10:00) User adopted a puppy named Biscuit.\n"
        "  * -> it is a beagle\n* 🟡 (10:05) User works at the library.\n\n"
        "Date: Mar 20, 2024\n* 🔴 (16:30) User started learning the cello."
    )
    tail = Message.user("My sister lives in Porto.", created_at=DAY)
    units = context_units([observations, tail])
    assert len(units) == 5
    assert units[0].text == "Date: Mar 3, 2024\n* 🔴 (10:00) User adopted a puppy named Biscuit."
    assert "Biscuit" in units[1].text and "beagle" in units[1].text  # a child carries its parent
    assert units[4].text.startswith("Date: Mar 3, 2024\n") and units[4].label == "message 1"
    # every token in one unit: the line with its header holds a date answer
    match = find_unit(answer_tokens("beagle puppy, 3 March 2024"), units)
    assert match is not None and match.label == "message 0 line 2"
    # words spread over two lines are bag-retained but not line-retained
    spread = answer_tokens("Biscuit cello")
    assert token_recall(spread, context_tokens([observations.text])) == 1.0
    assert find_unit(spread, units) is None


def test_the_rare_word_baseline_fits_its_budget_and_prefers_rare_sentences() -> None:
    counter = TokenCounter()
    chatter = [Message.user("That sounds good, thanks a lot!", created_at=DAY) for _ in range(30)]
    fact = Message.user("My grandmother Ilvana grew quinces in Tbilisi.", created_at=DAY)
    (context,) = rare_word_context([*chatter[:15], fact, *chatter[15:]], 60, counter)
    assert counter.count_messages([context]) <= 60
    assert "Ilvana grew quinces Tbilisi" in context.text
    assert context.text.startswith("Date: Mar 3, 2024")
    assert rare_word_context(chatter, 0, counter) == ()


async def test_report_scores_four_systems_lines_and_the_chance_floor() -> None:
    cases = [c.case() for c in load_locomo(FIXTURE)]
    report = await run_retention(cases, SMALL, dataset="fixture")
    overall = {row.system: row for row in report.rows if row.category == "overall"}
    assert set(overall) == {"full", "truncate", "rare", "obsmem"}
    for row in overall.values():
        assert row.line_pct <= row.retained_pct  # one line holding every token implies the bag does
    assert overall["rare"].context_tokens <= overall["obsmem"].context_tokens
    # scored against the other conversation, questions are mostly lost: that is chance
    chance = {row.system: row for row in report.chance}
    assert set(chance) == {"full", "truncate", "rare", "obsmem"}
    assert chance["full"].retained_pct < overall["full"].retained_pct
    first = report.results[0].to_json()
    matched = first["systems"]["obsmem"]["matched"]  # type: ignore[index]
    assert matched is None or {"unit", "text"} <= set(matched)
    retained_in_line = [r for r in report.results if r.line_retained("obsmem")]
    assert retained_in_line, "the fixture's obsmem context holds some answer in one line"
    label, text = retained_in_line[0].line_match["obsmem"] or ("", "")
    assert label.startswith("message") and text


async def test_the_curve_reports_each_budget_and_an_area_per_system() -> None:
    cases = [c.case() for c in load_locomo(FIXTURE, ["fx-1"])]
    curve = await run_curve(cases, [(200, 400), (300, 600)], dataset="fixture")
    assert [(p.message_tokens, p.observation_tokens) for p in curve.points] == [(200, 400), (300, 600)]
    data = curve.to_json()
    assert set(data["area"]) == {"truncate", "rare", "obsmem"}  # type: ignore[call-overload]
    for system in ("truncate", "rare", "obsmem"):
        lows = [p.systems[system][2] for p in curve.points]
        assert min(lows) <= curve.area(system) <= max(lows)


def test_cli_draws_a_curve_and_rejects_bad_budgets(tmp_path: Path) -> None:
    out = tmp_path / "curve.json"
    result = CliRunner().invoke(app, ["bench", "locomo", "--data", str(FIXTURE), "--conversations", "fx-1",
                                      "--budgets", "200:400,300:600", "--json", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "area" in result.output
    assert len(json.loads(out.read_text())["points"]) == 2
    bad = CliRunner().invoke(app, ["bench", "locomo", "--data", str(FIXTURE), "--budgets", "300"])
    assert bad.exit_code == 2
