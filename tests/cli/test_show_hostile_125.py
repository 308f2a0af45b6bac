"""``obsmem show`` and ``obsmem export`` as a user tries them: huge stored messages, markup and
terminal escapes in stored text, and a reader that stops early (``| head -1``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from tests.crash.harness import env

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
HUGE = 1_000_000


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread("t", "alice")
            await memory.save_messages("t", [
                Message.user("x" * HUGE),
                Message.user("see [link=https://evil.example]here[/link] and [red]red[/red] \x1b]8;;https://e\x07"),
                *(Message.user(f"line {n} " + "w" * 300) for n in range(400)),
            ])  # fmt: skip

    asyncio.run(run())


def test_show_cuts_a_huge_message_and_says_how_much_it_left_out(tmp_path: Path) -> None:
    """On main a message of a million characters was drawn whole (over a million characters of
    table on the terminal); it is cut at --chars (2,000 by default), saying how much is left."""
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["show", "t", "--store", str(db), "--tail", "500"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert len(result.stdout) < 400_000, len(result.stdout)
    said = " ".join(result.stdout.replace("│", " ").split())
    assert f"[{HUGE - 2_000:,} more characters: --chars 0 shows all]" in said
    whole = runner.invoke(app, ["show", "t", "--store", str(db), "--tail", "500", "--chars", "0"], env=WIDE)
    assert whole.exit_code == 0 and whole.stdout.count("x") >= HUGE


def test_show_prints_markup_and_escapes_in_stored_text_literally(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["show", "t", "--store", str(db), "--tail", "401"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "[link=https://evil.example]here[/link] and [red]red[/red] \\x1b]8;;https://e\\x07" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def _first_line_only(*args: str) -> subprocess.CompletedProcess[str]:
    """``obsmem ARGS | head -1``: the reader takes one line and closes the pipe."""
    return subprocess.run(["bash", "-c", '"$@" | head -1 > /dev/null; exit "${PIPESTATUS[0]}"', "bash",
                           sys.executable, "-m", "obsmem", *args],
                          capture_output=True, text=True, env={**env(), "COLUMNS": "200"}, timeout=300)  # fmt: skip


def test_a_reader_that_stops_early_gets_no_error_or_traceback(tmp_path: Path) -> None:
    """On main ``obsmem export -r alice | head -1`` ended with 'error: [Errno 32] Broken pipe' on
    stderr: the user's reader stopping is no error of the export."""
    db = tmp_path / "m.db"
    _seed(db)
    for args in (["show", "t", "--tail", "400", "--chars", "0"], ["export", "-r", "alice"]):
        done = _first_line_only(*args, "--store", str(db))
        said = [line for line in done.stderr.splitlines() if not line.startswith("store: ")]
        assert said == [], (args, done.stderr[-3000:])
