"""``obsmem mcp --store X`` with a store it cannot use (a file that is no database, a PostgreSQL
server that does not answer) ended in a 150-line Python traceback instead of the one-line
``error: …`` every other command prints for the same store (exit status 1 both ways)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def test_mcp_over_a_file_that_is_no_database_fails_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database\n")
    result = runner.invoke(app, ["mcp", "--store", str(bad), "--dev"], input="", env=WIDE)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # no traceback
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a database" in errors[0], result.output
    assert "Traceback" not in result.output and "DatabaseError" not in result.output, result.output
