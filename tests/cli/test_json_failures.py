"""``obsmem usage --json`` and ``obsmem queue --json`` that fail still print one JSON document on
stdout, ``{"error": {"type", "message"[, "argument"]}}`` (the REST API's error shape), with exit
status 1 and the error line on stderr as before. They printed nothing on stdout, so a script piping
``--json`` into jq read empty input (jq then exits 0, no document, no error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from obsmem.cli import app
from tests.cli.hostile_108 import refused, seed

runner = CliRunner()


def _json_error(result: Result, needle: str) -> dict[str, str]:
    refused(result, needle)  # the exit status and the one stderr line, as without --json
    document = json.loads(result.stdout)
    assert set(document) == {"error"}, document
    error: dict[str, str] = document["error"]
    assert needle in error["message"] and error["type"], error
    assert f"error: {error['message']}" in " ".join(result.stderr.split()), (error, result.stderr)
    return error


def _damaged(tmp_path: Path) -> Path:
    damaged = tmp_path / "m.db"
    damaged.write_bytes(b"this is not a database, it only ends in .db\n" * 200)
    return damaged


@pytest.mark.parametrize("command", [["usage"], ["queue"]])
def test_a_failing_json_command_prints_a_json_error(tmp_path: Path, command: list[str]) -> None:
    error = _json_error(runner.invoke(app, [*command, "--json"]), "pass --store URL")
    assert error["type"] == "InvalidInputError" and error["argument"] == "--store"
    error = _json_error(runner.invoke(app, [*command, "--json", "--store", str(tmp_path / "missing.db")]),
                        "no database at")  # fmt: skip
    assert error["type"] == "InvalidInputError"
    error = _json_error(runner.invoke(app, [*command, "--json", "--store", str(_damaged(tmp_path))]), "m.db")
    assert error["type"] == "StorageError", error


def test_a_usage_window_refused_is_a_json_error_naming_the_option(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    seed(db)
    error = _json_error(runner.invoke(app, ["usage", "--json", "--store", str(db), "--since", "soon"]), "--since")
    assert error["argument"] == "--since"
    config = tmp_path / "config.json"
    config.write_text("{not json")
    error = _json_error(runner.invoke(app, ["usage", "--json", "--store", str(db), "--config", str(config)]),
                        "cannot read the memory config")  # fmt: skip
    assert error["argument"] == "--config"


@pytest.mark.parametrize("command", [["usage"], ["queue"]])
def test_without_json_a_failure_prints_nothing_on_stdout(command: list[str]) -> None:
    result = runner.invoke(app, command)
    refused(result, "pass --store URL")
    assert result.stdout == ""


@pytest.mark.parametrize("command", [["usage"], ["queue"]])
def test_a_json_command_that_works_prints_its_document(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "m.db"
    seed(db)
    result = runner.invoke(app, [*command, "--json", "--store", str(db)])
    assert result.exit_code == 0, result.output
    assert "error" not in json.loads(result.stdout)


@pytest.mark.parametrize(
    ("command", "argument"),
    [
        (["usage", "--json", "--limit", "5"], "--limit"),  # no such option
        (["usage", "--json", "--by", "planet"], "--by"),  # a value the option does not take
        (["queue", "--json", "--bogus"], "--bogus"),
    ],
)
def test_a_json_command_line_refused_by_the_parser_is_a_json_error(command: list[str], argument: str) -> None:
    """Refused before the command runs (click's exit status 2): the refusal is the JSON document
    too, and click's message still goes to stderr."""
    result = runner.invoke(app, command)

    assert result.exit_code == 2, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"error"}, document
    error = document["error"]
    assert error["type"] == "InvalidInputError" and error["argument"] == argument, error
    assert argument in error["message"], error
    assert argument in result.stderr


def test_a_command_line_refused_without_json_prints_nothing_on_stdout() -> None:
    result = runner.invoke(app, ["usage", "--limit", "5"])
    assert result.exit_code == 2 and result.stdout == "" and "--limit" in result.stderr
