"""``obsmem demo --model SPEC``: a missing key fails in one line; a local server runs it end to end."""

from __future__ import annotations

import re
from pathlib import Path

from tests.models.wire_server import MemoryModelPlayer, WireServer
from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def test_missing_key_fails_in_one_line_naming_the_variable() -> None:
    result = runner.invoke(
        app, ["demo", "--model", "openai:gpt-4o-mini", "--turns", "3"], env={"OPENAI_API_KEY": None}
    )
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: No API key for openai: set the environment variable OPENAI_API_KEY."]
    assert "Traceback" not in result.output


def test_unknown_provider_fails_in_one_line() -> None:
    result = runner.invoke(app, ["demo", "--model", "openia:gpt-4o-mini"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown provider 'openia'" in lines[0] and "openai" in lines[0]


def test_demo_runs_end_to_end_against_a_local_openai_compatible_server(tmp_path: Path) -> None:
    player = MemoryModelPlayer()
    db = tmp_path / "demo.db"
    with WireServer() as server:
        server.responder = player
        result = runner.invoke(
            app,
            [
                "demo",
                "--model",
                f"openai-compatible:memory-test@{server.url}/v1",
                "--turns",
                "25",
                "--message-tokens",
                "800",
                "--observation-tokens",
                "150",
                "--db",
                str(db),
                "--no-context",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "openai-compatible:memory-test observer" in result.output
    assert player.observer_calls >= 2 and player.reflector_calls >= 1
    assert all(r.path == "/v1/chat/completions" and r.body["model"] == "memory-test" for r in server.requests)
    cycles = re.search(r"observations \(cycles\)\s*│\s*(\d+)", result.output)
    reflections = re.search(r"reflections\s*│\s*(\d+)", result.output)
    assert cycles and int(cycles.group(1)) == player.observer_calls
    assert reflections and int(reflections.group(1)) >= 1
