"""``obsmem bench knowledge`` prints each conversation's sample id from the LoCoMo file it is
given: a file from elsewhere is data, and an id holding Rich markup must show as written, never restyle
the table or make a link."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli.app import app

runner = CliRunner()
HOSTILE = "fx-[link=http:evil.example][bold]pwned"  # ids hold no whitespace, "/" or control characters


def test_a_sample_id_with_markup_prints_as_written(tmp_path: Path) -> None:
    data = json.loads((Path(__file__).parents[1] / "bench" / "data" / "locomo-tiny.json").read_text())
    data[0]["sample_id"] = HOSTILE
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(app, ["bench", "knowledge", "--data", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert HOSTILE in result.output  # the markup shown as written, not applied
