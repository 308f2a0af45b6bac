"""``obsmem serve`` printed the store's path and ``--host`` as Rich markup: a folder named
``x[/b]`` (or a host ``[/h]``) ended the command in a MarkupError traceback before it listened,
and ``[red]`` in a path would have coloured it instead of showing it. Run as a real process
that is stopped once it says it listens."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.crash.harness import env

LISTEN_TIMEOUT_S = 120.0


def test_serve_prints_a_path_with_brackets_as_written(tmp_path: Path) -> None:
    folder = tmp_path / "x[" / "b][red]"  # the path reads .../x[/b][red]/m.db
    folder.mkdir(parents=True)
    db = folder / "m.db"
    child = subprocess.Popen(
        [sys.executable, "-m", "obsmem", "serve", "--dev", "--host", "[/h]", "--store", str(db), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env(), "COLUMNS": "400"},
    )  # fmt: skip
    said: list[str] = []
    try:
        assert child.stderr is not None
        deadline = time.monotonic() + LISTEN_TIMEOUT_S  # a bounded wait for its line, not a timing assertion
        while time.monotonic() < deadline:
            line = child.stderr.readline()
            if not line:
                break
            said.append(line)
            if "listening on http" in line:
                break
    finally:
        child.kill()
        said.append(child.communicate()[1])
    text = "".join(said) + f"(exit {child.returncode})"
    assert "Traceback" not in text and "MarkupError" not in text, text[-3000:]
    assert f"store: sqlite {db}" in text, text
    assert "--dev: ignoring --host [/h]" in text, text
    assert "listening on http://127.0.0.1:0" in text, text


def test_bench_prints_a_model_spec_and_a_json_path_with_brackets_as_written(tmp_path: Path) -> None:
    """``obsmem bench survival --model 'nope[/x]:m'`` ended in a MarkupError traceback instead of
    its one-line error, and ``--json <path with [/b]>`` did so after the whole run (the file written)."""
    from typer.testing import CliRunner

    from obsmem.cli import app

    runner = CliRunner()
    refused = runner.invoke(app, ["bench", "survival", "--model", "nope[/x]:m"], env={"COLUMNS": "400"})
    assert refused.exit_code == 1, refused.output
    assert "error:" in refused.output and "nope[/x]:m" in refused.output, refused.output
    folder = tmp_path / "z["
    folder.mkdir()
    out = folder / "b]r.json"  # the path reads .../z[/b]r.json
    done = runner.invoke(app, ["bench", "survival", "--facts", "2", "--generations", "1", "--json", str(out)],
                         env={"COLUMNS": "400"})  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"wrote {out}" in done.output and out.is_file()
