"""The CLI on real SQLite files: the demo runs offline and reports compression; every command is
reachable from the ``obsmem`` script and ``python -m obsmem.cli``; ``migrate`` needs no dialect flag."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from typer.testing import CliRunner

import obsmem
import obsmem.cli
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


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("worker", "migrate", "version", "demo", "bench"):
        assert re.search(rf"│ {command}\s", result.output), command


def test_the_console_script_and_python_m_run_the_same_app() -> None:
    (script,) = entry_points(group="console_scripts", name="obsmem")
    assert script.value == "obsmem.cli:main"
    assert script.load() is obsmem.cli.main
    result = subprocess.run([sys.executable, "-m", "obsmem.cli", "version"], capture_output=True, text=True,
                            check=False, timeout=60)  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip() == obsmem.__version__


def test_migrate_a_plain_sqlite_path(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "plain.db"  # no sqlite:/// prefix, and a folder that does not exist yet
    dry = runner.invoke(app, ["migrate", "--store", str(db), "--dry-run"])
    assert dry.exit_code == 0 and "10 migration(s) pending: m001_initial" in dry.output, dry.output
    done = runner.invoke(app, ["migrate", "--store", str(db)])
    assert done.exit_code == 0 and "10 migration(s) applied" in done.output
    again = runner.invoke(app, ["migrate", "--store", str(db)])
    assert again.exit_code == 0 and "0 migration(s) applied" in again.output


def test_migrate_refuses_a_store_without_a_schema_with_a_message() -> None:
    result = runner.invoke(app, ["migrate", "--store", "memory://"])
    assert result.exit_code == 1
    message = " ".join(result.output.split())  # rich wraps long lines at the terminal width
    assert message.startswith("error: 'memory://' has no schema to migrate")
    assert "Traceback" not in result.output
