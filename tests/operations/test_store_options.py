"""Issue 22 §3, §5 without a server: every entry point takes the same URL forms, and the store's
options (migrate mode, pool size, timeouts) ride on the URL or on keywords, checked early."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import ConfigError, Memory
from obsmem.cli import app
from obsmem.storage import open_store, postgres_url
from obsmem.storage.postgres.store import PostgresStore


def test_url_options_reach_the_postgres_store_and_leave_the_libpq_url() -> None:
    store = open_store("postgres://app@db:5432/obsmem?sslmode=require&migrate=check&pool_max_size=20"
                       "&pool_min_size=2&statement_timeout_s=5&lock_timeout_s=none&retry_s=0")  # fmt: skip
    assert isinstance(store, PostgresStore)
    assert store.url == "postgres://app@db:5432/obsmem?sslmode=require"
    assert (store.migrate_mode, store.min_size, store.max_size) == ("check", 2, 20)
    assert (store.statement_timeout_s, store.lock_timeout_s, store.retry_s) == (5.0, None, 0.0)


def test_keywords_override_the_url_and_defaults_hold() -> None:
    store = open_store("postgresql+psycopg://app@db/obsmem?pool_max_size=20", pool_max_size=4, migrate="never")
    assert isinstance(store, PostgresStore)
    assert store.url == "postgresql://app@db/obsmem"
    assert (store.max_size, store.migrate_mode, store.migrate_on_open) == (4, "never", False)
    default = open_store("postgres://app@db/obsmem")
    assert isinstance(default, PostgresStore)
    assert (default.migrate_mode, default.max_size, default.statement_timeout_s, default.lock_timeout_s) == (
        "auto", 10, 30.0, 10.0
    )
    assert postgres_url("postgresql+psycopg://a@b/c") == ("postgresql://a@b/c", {})


@pytest.mark.parametrize("url, options", [
    ("postgres://app@db/obsmem?migrate=sometimes", {}),
    ("postgres://app@db/obsmem?pool_max_size=many", {}),
    ("postgres://app@db/obsmem", {"pool_max_size": 0}),
    ("postgres://app@db/obsmem", {"statement_timeout_s": -1}),
    ("postgres://app@db/obsmem", {"pool_size": 3}),
    ("sqlite:///x.db", {"migrate": "sometimes"}),  # migrate=check is a SQLite option too now
    ("sqlite:///x.db", {"pool_max_size": 3}),
    ("memory://", {"pool_max_size": 3}),
])  # fmt: skip
def test_bad_store_options_are_config_errors(url: str, options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        open_store(url, **options)


def test_memory_takes_the_options_on_its_url() -> None:
    memory = Memory("postgres://app@127.0.0.1:1/obsmem?pool_max_size=3&migrate=check")
    assert isinstance(memory.store, PostgresStore)
    assert (memory.store.max_size, memory.store.migrate_mode) == (3, "check")


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_migrate_accepts_every_postgres_url_form(scheme: str) -> None:
    result = CliRunner().invoke(app, ["migrate", "--store", f"{scheme}://u:pw@127.0.0.1:1/db?connect_timeout=1",
                                      "--dry-run"])  # fmt: skip
    assert result.exit_code == 1
    assert "Connection refused" in result.output or "connect" in result.output  # it tried the server ...
    assert "no schema" not in result.output and "unrecognised" not in result.output  # ... the URL was understood
    assert ":pw@" not in result.output  # and the password is not echoed


def test_worker_pool_options_are_postgres_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["worker", "--store", str(tmp_path / "w.db"), "--pool-size", "3", "--exit-when-idle"])
    assert result.exit_code == 1 and "PostgreSQL" in result.output
