"""The CLI on real SQLite files: the demo runs offline and reports compression."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def test_demo_runs_and_reports(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = runner.invoke(app, ["demo", "--db", str(db), "--turns", "60", "--no-context"])
    assert result.exit_code == 0, result.output
    assert "compression" in result.output
    assert db.exists()
    match = re.search(r"compression\s*│\s*([\d.]+)×", result.output)
    assert match and float(match.group(1)) > 1.0


def test_demo_rejects_bad_options() -> None:
    result = runner.invoke(app, ["demo", "--message-tokens", "0"])
    assert result.exit_code != 0


def test_version() -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0 and result.output.strip()
