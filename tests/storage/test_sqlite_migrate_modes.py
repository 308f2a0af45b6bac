"""``migrate=auto|check|never`` for SQLite, as for PostgreSQL (issue 22): an application opened
with ``check`` runs no DDL; a schema that is behind, or missing, is refused with a clear error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from obsmem import ConfigError, Memory, MigrationError, open_store

pytestmark = pytest.mark.anyio


async def test_check_refuses_a_missing_database_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    async with Memory(f"sqlite:///{path}?migrate=check") as memory:
        with pytest.raises(MigrationError, match="no obsmem database"):
            await memory.create_thread("t", resource_id="r")
    assert not path.exists()


async def test_check_refuses_a_schema_that_is_behind_and_names_what_is_pending(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with open_store(f"sqlite:///{path}") as store:  # auto: today's schema
        await store.migrate()
    with sqlite3.connect(path) as conn:  # roll the version table back one step: the newest is "pending"
        table = next(name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                     if "migrations" in name)  # fmt: skip
        rows = conn.execute(f"SELECT * FROM {table}").fetchall()
        assert rows
        columns = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
        key = columns[0]
        newest = max(rows, key=lambda row: row[0])[0]
        conn.execute(f"DELETE FROM {table} WHERE {key} = ?", (newest,))
    store = open_store(f"sqlite:///{path}", migrate="check")
    with pytest.raises(MigrationError, match="behind this obsmem: 1 migration") as caught:
        await store.get_thread("t")
    assert "obsmem migrate --store" in str(caught.value)
    await store.close()


async def test_check_and_never_open_a_current_database_without_ddl(tmp_path: Path) -> None:
    path = tmp_path / "current.db"
    async with Memory(f"sqlite:///{path}") as memory:
        await memory.create_thread("t", resource_id="r")
    for mode in ("check", "never"):
        async with Memory(open_store(f"sqlite:///{path}", migrate=mode)) as memory:
            assert (await memory.get_thread("t")).resource_id == "r"


def test_unknown_modes_and_options_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?migrate=sometimes")
    with pytest.raises(ConfigError):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?pool_max_size=3")
    with pytest.raises(ConfigError):
        open_store("memory://", migrate="check")
