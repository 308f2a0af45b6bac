"""JSON nested past Python's limit, where the command line reads JSON (hostile review, helper-108).

Before the fix: ``obsmem import`` of an export line nested 100,000 deep, and ``usage --config`` /
``worker --config`` / ``serve --config`` / ``bench locomo|longmemeval --data`` of such a file,
answered with a ``RecursionError`` traceback; an export whose message metadata was nested 300 deep passed the import's validation,
then the store could not write it (``ValueError: Maximum serialization depth exceeded``, a
traceback) after the thread was written: a thread without its messages was left behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from tests.cli.hostile_108 import refused as _refused
from tests.cli.hostile_108 import seed as _seed

runner = CliRunner()


def test_an_import_nested_too_deeply_is_refused_in_one_line(tmp_path: Path) -> None:
    export = tmp_path / "deep.jsonl"
    export.write_text("[" * 100_000 + "\n")
    target = tmp_path / "new.db"
    result = runner.invoke(app, ["import", str(export), "--store", str(target)])
    _refused(result, "line 1")
    assert not target.exists()


@pytest.mark.parametrize("command", [["usage"], ["worker", "--exit-when-idle"], ["serve", "--dev", "--port", "0"]])
def test_a_config_nested_too_deeply_is_refused_in_one_line(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    config = tmp_path / "memory.json"
    config.write_text("[" * 100_000)
    result = runner.invoke(app, [*command, "--store", str(db), "--config", str(config)])
    _refused(result, "memory config")


def test_an_import_too_deep_to_store_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    _seed(source)
    export = tmp_path / "alice.jsonl"
    assert runner.invoke(app, ["export", "-r", "alice", "--store", str(source), "-o", str(export)]).exit_code == 0
    lines = export.read_text().splitlines()
    number, line = next((n, line) for n, line in enumerate(lines) if json.loads(line).get("kind") == "message")
    item = json.loads(line)
    item["data"]["metadata"] = {"nested": "HOLE"}
    lines[number] = json.dumps(item).replace('"HOLE"', "[" * 300 + "]" * 300)
    export.write_text("\n".join(lines) + "\n")
    target = tmp_path / "target.db"
    result = runner.invoke(app, ["import", str(export), "--store", str(target)])
    _refused(result, f"line {number + 1}")
    assert not target.exists()  # nothing written: no thread without its messages


@pytest.mark.parametrize("benchmark", ["locomo", "longmemeval"])
def test_a_benchmark_file_nested_too_deeply_is_refused_in_one_line(tmp_path: Path, benchmark: str) -> None:
    data = tmp_path / "data.json"
    data.write_text("[" * 100_000)
    result = runner.invoke(app, ["bench", benchmark, "--data", str(data)])
    assert result.exit_code == 2, result.output  # a usage error naming --data, as for any bad file
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "nested too deeply" in result.output
