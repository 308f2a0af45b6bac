"""``obsmem demo --db`` ends by saying how to look inside (hostile review, helper-108).

Before the fix: those two commands failed for a file not ending in ``.db`` / ``.sqlite`` /
``.sqlite3`` (``--store`` reads such a path as no store) and for a path with a space (not quoted).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def test_the_demo_says_how_to_look_inside_in_commands_that_work(tmp_path: Path) -> None:
    folder = tmp_path / "my demo"
    folder.mkdir()
    db = folder / "replay.sqlite-file"
    result = runner.invoke(app, ["demo", "--db", str(db), "--turns", "3", "--no-context"])
    assert result.exit_code == 0, result.output
    commands = [line.split(":", 1)[1] if line.startswith("Look inside:") else line
                for line in result.stdout.splitlines()[-2:]]  # fmt: skip
    assert [shlex.split(c)[:2] for c in commands] == [["obsmem", "threads"], ["obsmem", "show"]], commands
    for command in commands:
        done = runner.invoke(app, shlex.split(command)[1:])
        assert done.exit_code == 0, (command, done.output)
        assert "demo-thread" in done.stdout
