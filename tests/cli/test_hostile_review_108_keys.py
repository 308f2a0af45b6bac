"""``obsmem keys`` as a hostile user drives it (hostile review, helper-108).

Before the fix: ``keys list|create|revoke`` on a damaged database file answered with a traceback
(``sqlite3.DatabaseError``; an unreachable PostgreSQL server: ``PoolTimeout`` after 30 s);
``keys create --org '[/]'`` stored the key, then crashed on Rich markup before printing it, so its
secret was lost; a store path holding ``[bold]`` was printed without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from tests.cli.hostile_108 import refused as _refused

runner = CliRunner()


@pytest.mark.parametrize(
    "command", [["keys", "list"], ["keys", "revoke", "abc"], ["keys", "create", "--org", "acme"]]
)
def test_keys_on_a_damaged_database_end_in_one_line(tmp_path: Path, command: list[str]) -> None:
    damaged = tmp_path / "m.db"
    damaged.write_bytes(b"this is not a database, it only ends in .db\n" * 200)
    result = runner.invoke(app, [*command, "--store", str(damaged)])
    _refused(result, "not a database")


def test_a_key_for_an_org_that_looks_like_markup_is_still_shown(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    # ("[/]" before 7a83bd0, which refuses an org id holding "/": it is one segment of a scope)
    result = runner.invoke(app, ["keys", "create", "--org", "[bold]", "--store", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().startswith("om_"), result.output  # the secret, shown once
    assert "for org [bold]" in result.stderr


def test_a_store_path_that_looks_like_markup_is_shown_for_keys(tmp_path: Path) -> None:
    folder = tmp_path / "keys[bold]"
    folder.mkdir()
    result = runner.invoke(app, ["keys", "create", "--org", "acme", "--store", str(folder / "k.db")])
    assert result.exit_code == 0, result.output
    assert f"store: sqlite {folder / 'k.db'}" in result.stderr
