"""Storage: the :class:`Store` contract, its adapters, and :func:`open_store`.

Pick a store by URL::

    open_store()                          # SQLite at default_store_path()
    open_store("memory://")               # in memory, gone when the process ends
    open_store("sqlite:///data/om.db")    # relative to the current folder
    open_store("sqlite:////var/om.db")    # absolute
    open_store("~/notes/om.db")           # a plain path ending in .db
    open_store("postgresql://user@host/db")   # PostgreSQL (pip install 'obsmem[postgres]')

Every store is an async context manager: ``async with open_store() as store: ...``.
"""

from __future__ import annotations

from pathlib import Path

from obsmem.errors import ConfigError
from obsmem.redact import redact_secrets
from obsmem.storage.contract import (
    BufferedChunk,
    BufferedReflection,
    DeadWork,
    Lease,
    ObservationRecord,
    Store,
    ThreadState,
    WorkItem,
    WriteResult,
    lineage_key,
)
from obsmem.storage.memory import MemoryStore
from obsmem.storage.sqlite.store import SQLiteStore, default_data_dir, default_store_path

__all__ = [
    "BufferedChunk",
    "BufferedReflection",
    "DeadWork",
    "Lease",
    "MemoryStore",
    "ObservationRecord",
    "SQLiteStore",
    "Store",
    "ThreadState",
    "WorkItem",
    "WriteResult",
    "default_data_dir",
    "default_store_path",
    "lineage_key",
    "open_store",
]

ACCEPTED_URLS = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "postgresql://user@host:5432/database, "
    "a file path ending in .db/.sqlite/.sqlite3, or nothing for the default SQLite file"
)
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open_store(url: str | None = None) -> Store:
    """Build the store a URL names. Does no I/O; the store opens its file on first use."""
    if url is None:
        return SQLiteStore(default_store_path())
    if not isinstance(url, str):
        raise ConfigError(
            "store", f"expected a URL string or None, got {url!r} ({type(url).__name__})", allowed=ACCEPTED_URLS
        )
    text = url.strip()
    if text == "memory://":
        return MemoryStore()
    if text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]  # "sqlite:////abs" leaves "/abs"
        if not path:
            raise ConfigError("store", f"'{redact_secrets(url)}' names no database file", allowed=ACCEPTED_URLS)
        return SQLiteStore(Path(path))
    if text.startswith(("postgresql://", "postgres://", "postgresql+")):
        return _postgres_store(text)
    if "://" not in text and text.lower().endswith(_SQLITE_SUFFIXES):
        return SQLiteStore(Path(text))
    raise ConfigError("store", f"unrecognised store URL '{redact_secrets(url)}'", allowed=ACCEPTED_URLS)


def _postgres_store(url: str) -> Store:
    """psycopg is an optional dependency, imported only when a PostgreSQL URL is opened."""
    if url.startswith("postgresql+"):  # SQLAlchemy-style "postgresql+psycopg://": libpq wants the plain form
        url = "postgresql://" + url.split("://", 1)[1]
    try:
        from obsmem.storage.postgres.store import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            "store",
            f"PostgreSQL needs extra packages that are not installed ({exc.name or exc})",
            allowed="pip install 'obsmem[postgres]' (psycopg[binary], psycopg-pool)",
        ) from exc
    return PostgresStore(url)
