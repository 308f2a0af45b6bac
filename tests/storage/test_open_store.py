"""open_store: which URL builds which store, and what an unknown URL says."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.errors import ConfigError
from obsmem.storage import MemoryStore, SQLiteStore, Store, default_store_path, open_store
from obsmem.types import Thread


def test_none_is_sqlite_at_default_path(_isolated_home: Path) -> None:
    store = open_store()
    assert isinstance(store, SQLiteStore)
    assert store.path == default_store_path() == _isolated_home / "obsmem.db"
    assert store.url == f"sqlite:///{_isolated_home / 'obsmem.db'}"


def test_memory_url() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore) and store.url == "memory://"
    assert isinstance(store, Store)


def test_sqlite_url_relative_to_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///data/om.db")
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "data" / "om.db"
    assert isinstance(store, Store)


def test_sqlite_url_absolute(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db")  # tmp_path starts with "/": four slashes
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "abs.db"
    assert store.url == f"sqlite:///{tmp_path}/abs.db"


@pytest.mark.parametrize("name", ["plain.db", "plain.sqlite", "plain.sqlite3"])
def test_plain_path(tmp_path: Path, name: str) -> None:
    store = open_store(str(tmp_path / name))
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / name


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u@localhost/om", "postgresql://u@localhost/om"),
        ("postgres://localhost/om", "postgres://localhost/om"),
        ("postgresql+psycopg://u@localhost/om", "postgresql://u@localhost/om"),
    ],
)
def test_postgres_url_builds_a_postgres_store_without_io(url: str, expected: str) -> None:
    from obsmem.storage.postgres.store import PostgresStore

    store = open_store(url)  # nothing listens on localhost:5432 here: no connection is attempted
    assert isinstance(store, PostgresStore) and store.url == expected
    assert isinstance(store, Store)


@pytest.mark.parametrize("url", ["mysql://x/y", "notes.txt", "sqlite:///", "memory", "redis://x", ""])
def test_unknown_url_lists_accepted_forms(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_store(url)
    message = str(info.value)
    assert info.value.option == "store"
    for form in ("memory://", "sqlite:///relative/path.db", "sqlite:////absolute/path.db", ".db"):
        assert form in message


@pytest.mark.anyio
@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_async_with_opens_and_closes(url: str, tmp_path: Path) -> None:
    target = url if url == "memory://" else f"sqlite:///{tmp_path}/ctx.db"
    async with open_store(target) as store:
        created = await store.create_thread(Thread(id="t1", resource_id="r1"))
        assert await store.get_thread("t1") == created
