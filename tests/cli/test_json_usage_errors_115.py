"""``obsmem queue --json`` with a command name click refuses (``obsmem queue --json stats``, a
command queue does not have: exit status 2) printed nothing on stdout, so a script piping it into
jq read empty input; c52473e made the refused options of the same command line a JSON document,
but an unknown command is refused later (when the group looks its command up), past that check.
It is the JSON document too now, click's message still on stderr."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def test_an_unknown_command_after_queue_json_is_a_json_error() -> None:
    result = runner.invoke(app, ["queue", "--json", "stats"])

    assert result.exit_code == 2, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"error"}, document
    assert document["error"]["type"] == "InvalidInputError"
    assert "stats" in document["error"]["message"], document
    assert "stats" in result.stderr


def test_an_unknown_command_without_json_prints_nothing_on_stdout() -> None:
    result = runner.invoke(app, ["queue", "stats"])
    assert result.exit_code == 2 and result.stdout == "" and "stats" in result.stderr
