"""What a newcomer types first: ``--version``, ``-h`` anywhere, bare ``obsmem``, ``python -m obsmem``,
``bench locomo`` without data, and a worker kind that does not exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import obsmem
from obsmem.cli import app

runner = CliRunner()


def _flat(text: str) -> str:
    """Rich draws errors in boxes and wraps them: compare words, not layout."""
    return " ".join(text.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def test_version_flag() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"obsmem {obsmem.__version__}"


@pytest.mark.parametrize(
    "args",
    [[], ["demo"], ["worker"], ["migrate"], ["bench"], ["bench", "locomo"], ["threads"], ["show"]],
    ids=lambda args: " ".join(args) or "root",
)
def test_short_and_long_help_everywhere(args: list[str]) -> None:
    short = runner.invoke(app, [*args, "-h"])
    long = runner.invoke(app, [*args, "--help"])
    assert short.exit_code == 0, short.output
    assert short.output == long.output
    assert "Usage:" in short.output and re.search(r"--help\s+-h\s", short.output), short.output


@pytest.mark.parametrize("args", [[], ["bench"]], ids=["obsmem", "obsmem bench"])
def test_a_bare_group_prints_its_help_and_succeeds(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and "Commands" in result.output


def test_python_m_obsmem_is_the_obsmem_command() -> None:
    version = subprocess.run([sys.executable, "-m", "obsmem", "--version"], capture_output=True, text=True,
                             check=False, timeout=60)  # fmt: skip
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"obsmem {obsmem.__version__}"
    bare = subprocess.run([sys.executable, "-m", "obsmem"], capture_output=True, text=True, check=False,
                          timeout=60)  # fmt: skip
    assert bare.returncode == 0, bare.stderr
    assert "Usage:" in bare.stdout and "threads" in bare.stdout and "show" in bare.stdout


def test_bench_locomo_needs_data_and_says_where_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OBSMEM_LOCOMO", raising=False)
    result = runner.invoke(app, ["bench", "locomo"])
    assert result.exit_code == 2, result.output
    message = _flat(result.output)
    assert "Missing option '--data'" in message
    assert "OBSMEM_LOCOMO" in message and "locomo10.json" in message
    assert "shared/data" not in message  # no path from this repository's development tree


def test_bench_locomo_reads_the_path_from_obsmem_locomo(monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = Path(__file__).parents[1] / "bench" / "data" / "locomo-tiny.json"
    monkeypatch.setenv("OBSMEM_LOCOMO", str(fixture))
    result = runner.invoke(app, ["bench", "locomo", "--conversations", "fx-1", "--message-tokens", "300",
                                 "--observation-tokens", "600"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "obsmem" in result.output and "overall" in result.output


def test_worker_refuses_an_unknown_kind_before_it_starts(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    result = runner.invoke(app, ["worker", "--store", str(db), "--kind", "bogus", "--exit-when-idle"])
    assert result.exit_code == 2, result.output
    message = _flat(result.output)
    assert "Invalid value for '--kind'" in message
    assert "'bogus'" in message and "observe" in message and "reflect" in message
    assert not db.exists()  # refused while parsing: no store was opened


def test_worker_accepts_the_known_kinds(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    result = runner.invoke(app, ["worker", "--store", str(db), "--kind", "observe", "--kind", "reflect",
                                 "--exit-when-idle", "--poll", "0.05"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "worker done: 0 claimed" in result.output
