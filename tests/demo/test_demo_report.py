"""``obsmem demo`` as a user sees it: tool calls and results are drawn (never "(no text)"), and
every generation is counted, however many reflections the thresholds cause."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def _measure(output: str, name: str) -> int:
    match = re.search(rf"{re.escape(name)}\s*│\s*([\d,]+)", output)
    assert match, f"no '{name}' row in:\n{output}"
    return int(match.group(1).replace(",", ""))


def test_the_final_context_draws_tool_calls_and_results() -> None:
    result = runner.invoke(app, ["demo", "--turns", "25"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "(no text)" not in out
    # turn 21 runs the tests on the fix branch: the call with its arguments, then its result
    assert "→ tool run_tests(repo='tessera/waypoint', command='pytest tests/test_eta.py" in out
    assert "← result run_tests:" in out
    # a long result is cut, and says so
    assert re.search(r"← result run_tests: .*…", out, re.S)


def test_every_generation_is_counted_past_one_hundred() -> None:
    result = runner.invoke(app, ["demo", "--turns", "100", "--message-tokens", "40", "--observation-tokens",
                                 "20", "--no-context"], env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    reflections = _measure(result.stdout, "reflections")
    generations = _measure(result.stdout, "generations")
    assert reflections > 100
    assert generations == reflections + 1  # the first generation, then one per reflection
