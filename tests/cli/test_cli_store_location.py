"""Every command that opens a store says which one, resolved: an absolute SQLite path, a PostgreSQL
URL without its password. A relative ``sqlite:///tmp/x.db`` keeps its meaning (three slashes:
relative to the current folder) but is shown resolved, with a hint when it looks meant absolute."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_migrate_prints_the_absolute_sqlite_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["migrate", "--store", "nested/plain.db"])
    assert result.exit_code == 0, result.output
    assert f"store: sqlite {tmp_path / 'nested' / 'plain.db'}" in result.stderr
    assert "migrations applied" in result.stdout


def test_a_relative_url_that_looks_absolute_is_resolved_and_questioned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    name = f"obsmem-{uuid.uuid4().hex}.db"
    result = runner.invoke(app, ["migrate", "--store", f"sqlite:///tmp/{name}"])
    assert result.exit_code == 0, result.output
    message = _flat(result.stderr)
    assert f"store: sqlite {tmp_path / 'tmp' / name}" in message
    assert f"did you mean sqlite:////tmp/{name}?" in message
    assert (tmp_path / "tmp" / name).exists()  # the convention is kept: three slashes are relative
    assert not Path("/tmp", name).exists()


def test_a_relative_url_that_does_not_look_absolute_gets_no_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["migrate", "--store", "sqlite:///data-not-at-root/x.db"])
    assert result.exit_code == 0, result.output
    assert f"store: sqlite {tmp_path / 'data-not-at-root' / 'x.db'}" in result.stderr
    assert "did you mean" not in result.output


def test_an_absolute_url_gets_no_hint(tmp_path: Path) -> None:
    db = tmp_path / "abs.db"
    result = runner.invoke(app, ["migrate", "--store", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    assert f"store: sqlite {db}" in result.stderr and "did you mean" not in result.output


def test_migrate_masks_a_postgresql_password() -> None:
    result = runner.invoke(app, ["migrate", "--store", "postgresql://u:s3cret@127.0.0.1:1/db"])
    assert result.exit_code == 1  # nothing listens on port 1
    assert "store: postgresql://u@127.0.0.1:1/db" in result.stderr
    assert "s3cret" not in result.output


def test_worker_prints_the_store(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    result = runner.invoke(app, ["worker", "--store", f"sqlite:///{db}", "--exit-when-idle", "--poll", "0.1"])
    assert result.exit_code == 0, result.output
    assert f"store: sqlite {db}" in result.stderr


def test_demo_prints_the_database_it_keeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["demo", "--db", "kept.db", "--turns", "3", "--no-context"])
    assert result.exit_code == 0, result.output
    assert f"store: sqlite {tmp_path / 'kept.db'}" in result.stderr
    assert f"obsmem show demo-thread --store {tmp_path / 'kept.db'}" in _flat(result.stdout)


def test_demo_says_its_default_database_is_temporary() -> None:
    result = runner.invoke(app, ["demo", "--turns", "3", "--no-context"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stderr.splitlines() if line.startswith("store: sqlite "))
    assert "demo.db" in line and "temporary" in line


def test_the_hint_reaches_a_real_process(tmp_path: Path) -> None:
    name = f"obsmem-{uuid.uuid4().hex}.db"
    done = subprocess.run([sys.executable, "-m", "obsmem", "migrate", "--store", f"sqlite:///tmp/{name}"],
                          capture_output=True, text=True, check=False, timeout=60, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"store: sqlite {tmp_path / 'tmp' / name}" in done.stderr
    assert f"did you mean sqlite:////tmp/{name}?" in _flat(done.stderr)
