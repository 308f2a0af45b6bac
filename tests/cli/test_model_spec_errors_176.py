"""A --model spec the CLI refuses is quoted in the error as it was typed: bench's console drew Rich
emoji codes (':smile:x' quoted as a smiley), and demo wrote the spec raw (a bidi override in a
pasted spec reordered the error line; an ESC sequence reached the terminal)."""

from __future__ import annotations

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "400"}


def test_bench_quotes_a_refused_model_spec_as_typed() -> None:
    result = runner.invoke(app, ["bench", "survival", "--model", ":smile:x"], env=WIDE)
    assert result.exit_code == 1, result.output
    assert "':smile:x'" in result.output and "\U0001f604" not in result.output, result.output


def test_demo_quotes_a_refused_model_spec_spelled() -> None:
    result = runner.invoke(app, ["demo", "--model", "open\u202eai:x"], env=WIDE)
    assert result.exit_code == 1, result.output
    assert "\u202e" not in result.output and "open\\u202eai:x" in result.output, ascii(result.output)
