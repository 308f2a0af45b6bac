"""``obsmem export -o`` naming a folder, or a file in a folder that does not exist (found by
helper 196): the command printed Python's errno text, ``error: [Errno 21] Is a directory:
'out'``, after opening the store. It now says what is wrong with -o and what to pass, before
the store is opened, and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


@pytest.mark.parametrize(("target", "said"), [("out", "is a folder"), ("missing/alice.jsonl", "no folder")])
def test_export_to_a_path_it_cannot_write_says_why(db: Path, tmp_path: Path, target: str, said: str) -> None:
    (tmp_path / "out").mkdir()
    output = tmp_path / target
    result = runner.invoke(app, ["export", "-r", "alice", "--store", str(db), "-o", str(output)])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert said in lines[0] and "Errno" not in lines[0] and "-o" in lines[0], lines[0]
    assert not (tmp_path / "missing").exists() and list((tmp_path / "out").iterdir()) == []


def test_export_to_a_new_file_still_writes_it(db: Path, tmp_path: Path) -> None:
    output = tmp_path / "alice.jsonl"
    result = runner.invoke(app, ["export", "-r", "alice", "--store", str(db), "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert '"resource_id": "alice"' in output.read_text().splitlines()[0]
