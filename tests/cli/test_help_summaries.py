"""The command lists of ``obsmem --help`` and of each group read as one summary per command.

Typer's rich help kept every line break of a command's docstring in the command list, so at any
width a summary broke where the source line did (``threads``: "...observed and pending" then,
alone on the next line, "tokens, generations, ..."), and reST quotes (````--json````) were
printed as they were."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from obsmem.cli.app import app

runner = CliRunner()

GROUPS = [[], ["bench"], ["knowledge"], ["queue"], ["keys"]]


def _command_rows(args: list[str]) -> list[str]:
    """The lines of the Commands panel of ``obsmem ARGS --help`` at 1000 columns (no summary is that long)."""
    wide = {"COLUMNS": "1000", "NO_COLOR": "1"}
    result = runner.invoke(app, [*args, "--help"], env=wide, terminal_width=1000)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = next(i for i, line in enumerate(lines) if "Commands" in line and line.lstrip().startswith("╭"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("╰"))
    return [line.strip().strip("│").rstrip() for line in lines[start + 1 : end]]


@pytest.mark.parametrize("args", GROUPS, ids=lambda a: " ".join(a) or "obsmem")
def test_each_command_summary_is_one_line_without_source_quotes(args: list[str]) -> None:
    rows = _command_rows(args)
    assert rows
    for row in rows:
        # every row names its command: a row starting with spaces is a summary broken in two
        assert re.match(r"^ ?[a-z][a-z-]* +\S", row), rows
        assert "``" not in row, row
