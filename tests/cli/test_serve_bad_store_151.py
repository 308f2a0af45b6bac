"""``obsmem serve --store X`` with a file that is no database started uvicorn anyway, whose
application startup then failed with a ~60-line Python traceback (sqlite3.DatabaseError) and
exit status 3. It now refuses in one line before it listens, exit status 1, as every other
command does for that store (with --dev too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


@pytest.mark.parametrize("flags", [["--dev"], []], ids=["dev", "keys"])
def test_serve_over_a_file_that_is_no_database_fails_in_one_line(tmp_path: Path, flags: list[str]) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database\n")
    result = runner.invoke(app, ["serve", "--store", str(bad), "--port", "0", *flags], env=WIDE)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a database" in errors[0], result.output
    assert "Traceback" not in result.output and "listening on http" not in result.output, result.output
