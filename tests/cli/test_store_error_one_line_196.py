"""A PostgreSQL store that does not answer: the driver's error spans two lines ('… Connection
refused' then an indented 'Is the server running on that host …?'), and every command printed it
so, the second line with no 'error:' in front of it (found by helper 196). A command's error is
one line: its line breaks and the indentation after them read as one space."""

from __future__ import annotations

import json
import socket

import pytest
from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def _closed_port() -> int:
    with socket.socket() as probe:  # a port nothing listens on once this closes it
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("command", [["threads"], ["show", "t1"], ["usage", "--json"], ["queue", "--json"]])
def test_a_store_that_does_not_answer_is_one_line(command: list[str]) -> None:
    url = f"postgresql://app:s3cret-pw@127.0.0.1:{_closed_port()}/memory"
    result = runner.invoke(app, [*command, "--store", url])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("store:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "s3cret-pw" not in result.output
    if "--json" in command:
        message = json.loads(result.stdout)["error"]["message"]
        assert "\n" not in message and "refused" in message.lower(), message
