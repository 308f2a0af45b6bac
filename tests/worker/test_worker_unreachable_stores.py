"""``obsmem worker`` with a ``--knowledge`` or ``--vectors`` store it cannot use says so and
exits 1 before it starts working: with an unreachable PostgreSQL URL it exited 0 and said
nothing (``--exit-when-idle``; found by helper-151), so a misconfigured worker looked healthy
while every capture and every group's vector would fail later."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app

#: Nothing listens on port 1 here: a connection is refused at once.
UNREACHABLE = "postgresql://obsmem:s3cret-pw@127.0.0.1:1/nothing"


@pytest.mark.parametrize("option", ["--knowledge", "--vectors"])
def test_an_unusable_side_store_stops_the_worker_at_start(option: str, tmp_path: Path) -> None:
    db = tmp_path / "main.db"
    extra = ["--embedder", "lexical"] if option == "--vectors" else []
    result = CliRunner().invoke(app, ["worker", "--store", f"sqlite:///{db}", option, UNREACHABLE, *extra,
                                      "--exit-when-idle", "--poll", "0.01"])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "s3cret-pw" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert lines and ("knowledge" if option == "--knowledge" else "vector") in lines[0], result.output
    assert "Traceback" not in result.output


def test_a_usable_knowledge_file_still_works(tmp_path: Path) -> None:
    db = tmp_path / "main.db"
    result = CliRunner().invoke(app, ["worker", "--store", f"sqlite:///{db}", "--knowledge",
                                      str(tmp_path / "k.db"), "--exit-when-idle", "--poll", "0.01"])  # fmt: skip
    assert result.exit_code == 0, result.output
