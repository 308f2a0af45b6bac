"""``obsmem bench knowledge`` on the tiny LoCoMo fixture: a table, JSON, and scores that can fail."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app

FIXTURE = Path(__file__).parent / "data" / "locomo-tiny.json"


def test_cli_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "knowledge.json"
    result = CliRunner().invoke(app, ["bench", "knowledge", "--data", str(FIXTURE), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "Knowledge capture (offline agents)" in result.output and "all" in result.output
    rows = json.loads(out.read_text())
    assert rows and {"conversation", "facts", "records", "recall", "precision", "duplicates_per_fact"} <= set(rows[0])
    for row in rows:
        assert 0.0 <= row["recall"] <= 1.0 and 0.0 <= row["precision"] <= 1.0
    assert sum(row["records"] for row in rows) > 0, "the agents captured nothing from the fixture"


def test_cli_refuses_a_missing_file() -> None:
    result = CliRunner().invoke(app, ["bench", "knowledge", "--data", "/nonexistent/locomo.json"])
    assert result.exit_code != 0
