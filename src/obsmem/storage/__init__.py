"""Storage: the :class:`Store` contract, its adapters, and :func:`open_store`.

Pick a store by URL::

    open_store()                          # SQLite at default_store_path()
    open_store("memory://")               # in memory, gone when the process ends
    open_store("sqlite:///data/om.db")    # relative to the current folder
    open_store("sqlite:////var/om.db")    # absolute
    open_store("~/notes/om.db")           # a plain path ending in .db

Every store is an async context manager: ``async with open_store() as store: ...``.
"""

from __future__ import annotations

from pathlib import Path

from obsmem.errors import ConfigError
from obsmem.storage.contract import (
    BufferedChunk,
    BufferedReflection,
    Lease,
    ObservationRecord,
    Store,
    ThreadState,
    WriteResult,
    lineage_key,
)
from obsmem.storage.memory import MemoryStore
from obsmem.storage.sqlite import SQLiteStore, default_data_dir, default_store_path

__all__ = [
    "BufferedChunk",
    "BufferedReflection",
    "Lease",
    "MemoryStore",
    "ObservationRecord",
    "SQLiteStore",
    "Store",
    "ThreadState",
    "WriteResult",
    "default_data_dir",
    "default_store_path",
    "lineage_key",
    "open_store",
]

ACCEPTED_URLS = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "a file path ending in .db/.sqlite/.sqlite3, or nothing for the default SQLite file"
)
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open_store(url: str | None = None) -> Store:
    """Build the store a URL names. Does no I/O; the store opens its file on first use."""
    if url is None:
        return SQLiteStore(default_store_path())
    text = url.strip()
    if text == "memory://":
        return MemoryStore()
    if text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]  # "sqlite:////abs" leaves "/abs"
        if not path:
            raise ConfigError("store", f"'{url}' names no database file", allowed=ACCEPTED_URLS)
        return SQLiteStore(Path(path))
    if text.startswith(("postgresql://", "postgres://", "postgresql+")):
        raise ConfigError(
            "store",
            "PostgreSQL support is not installed yet (it arrives with issue 7); "
            "use SQLite for now, e.g. open_store() or open_store('sqlite:///obsmem.db')",
            allowed=ACCEPTED_URLS,
        )
    if "://" not in text and text.lower().endswith(_SQLITE_SUFFIXES):
        return SQLiteStore(Path(text))
    raise ConfigError("store", f"unrecognised store URL '{url}'", allowed=ACCEPTED_URLS)
