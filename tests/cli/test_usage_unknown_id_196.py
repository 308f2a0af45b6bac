"""``obsmem usage --thread`` / ``--resource`` naming an id the store does not hold (a typo): the
command printed an empty ledger, a total of $0.0000, as if that thread's memory had cost nothing
(found by helper 196; ``GET /api/threads/{id}/usage`` answers 404 there, and ``forget`` and
``delete-resource`` say 'check the id'). It now says so on stderr; stdout keeps the report (with
``--json``, the one JSON document)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
@pytest.mark.parametrize(("option", "value"), [("--thread", "t1-typo"), ("--resource", "alcie")])
def test_an_id_the_store_does_not_hold_is_said(db: Path, option: str, value: str, json_flag: list[str]) -> None:
    result = runner.invoke(app, ["usage", "--store", str(db), option, value, *json_flag])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"'{value}'" in notes[0] and "check the id" in notes[0], result.stderr
    if json_flag:
        assert json.loads(result.stdout)["rows"] == []


@pytest.mark.parametrize(("option", "value"), [("--thread", "t1"), ("--resource", "alice")])
def test_an_id_it_holds_gets_no_note(db: Path, option: str, value: str) -> None:
    result = runner.invoke(app, ["usage", "--store", str(db), option, value, "--json"])
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr and json.loads(result.stdout)["filter"] == {option[2:] + "_id": value}
