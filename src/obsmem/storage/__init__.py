"""Storage: the :class:`Store` contract, its adapters, and :func:`open_store`.

Pick a store by URL::

    open_store()                          # SQLite at default_store_path()
    open_store("memory://")               # in memory, gone when the process ends
    open_store("sqlite:///data/om.db")    # relative to the current folder
    open_store("sqlite:////var/om.db")    # absolute
    open_store("~/notes/om.db")           # a plain path ending in .db
    open_store("postgresql://user@host/db")   # PostgreSQL (pip install 'obsmem[postgres]')
    open_store("postgres://user@host/db?migrate=check&pool_max_size=20&statement_timeout_s=10")

A PostgreSQL URL (``postgresql://``, ``postgres://`` or SQLAlchemy's ``postgresql+psycopg://``)
may carry the store's own options as query parameters, so that every entry point taking a URL
(``Memory(url)``, ``obsmem worker``, ``obsmem migrate``) takes them the same way: ``migrate``
(``auto``, ``check``, ``never``), ``pool_min_size``, ``pool_max_size``, ``statement_timeout_s``,
``lock_timeout_s`` (``none``: the server's), ``retry_s``. They are removed before the URL reaches
libpq; keyword arguments of :func:`open_store` override them. A SQLite URL takes ``migrate`` the
same way (``sqlite:///data/om.db?migrate=check``): ``check`` refuses a database whose schema is
behind, or that does not exist, and creates nothing; ``never`` does not look.

Every store is an async context manager: ``async with open_store() as store: ...``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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
    "postgres_url",
]

ACCEPTED_URLS = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "postgresql://user@host:5432/database, "
    "a file path ending in .db/.sqlite/.sqlite3, or nothing for the default SQLite file"
)
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open_store(url: str | None = None, **options: object) -> Store:
    """Build the store a URL names. Does no I/O; the store opens its file on first use.

    ``options`` (also accepted as URL query parameters, see the module): ``migrate`` (SQLite and
    PostgreSQL), and for PostgreSQL ``pool_min_size``, ``pool_max_size``, ``statement_timeout_s``,
    ``lock_timeout_s``, ``retry_s``."""
    unknown = sorted(set(options) - set(STORE_OPTIONS))
    if unknown:
        raise ConfigError("open_store", f"unknown option {unknown[0]!r}", allowed=", ".join(STORE_OPTIONS))
    given = {name: value for name, value in options.items() if value is not None}
    if url is None:
        return SQLiteStore(default_store_path())
    if not isinstance(url, str):
        raise ConfigError(
            "store", f"expected a URL string or None, got {url!r} ({type(url).__name__})", allowed=ACCEPTED_URLS
        )
    text = url.strip()
    if text.startswith(("postgresql://", "postgres://", "postgresql+")):
        return _postgres_store(text, given)
    if text.startswith("sqlite:///") and "?" in text:  # sqlite:///path?migrate=check
        text, _, query = text.partition("?")
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name not in STORE_OPTIONS:
                raise ConfigError("store", f"unknown option {name!r} in '{redact_secrets(url)}'",
                                  allowed=", ".join(STORE_OPTIONS))  # fmt: skip
            given.setdefault(name, _option_value(name, value))
    if given and set(given) != {"migrate"}:
        raise ConfigError("store", f"{', '.join(sorted(set(given) - {'migrate'}))} apply to PostgreSQL stores only",
                          allowed="a postgresql:// URL, or no such option")  # fmt: skip
    migrate = given.get("migrate", "auto")
    if text == "memory://":
        if migrate not in ("auto", True):
            raise ConfigError("store", "migrate applies to SQLite and PostgreSQL stores only",
                              allowed="a sqlite:/// or postgresql:// URL")  # fmt: skip
        return MemoryStore()
    if text.startswith("sqlite:///"):
        path = text[len("sqlite:///") :]  # "sqlite:////abs" leaves "/abs"
        if not path:
            raise ConfigError("store", f"'{redact_secrets(url)}' names no database file", allowed=ACCEPTED_URLS)
        return SQLiteStore(Path(path), migrate=migrate)
    if "://" not in text and text.lower().endswith(_SQLITE_SUFFIXES):
        return SQLiteStore(Path(text), migrate=migrate)
    raise ConfigError("store", f"unrecognised store URL '{redact_secrets(url)}'", allowed=ACCEPTED_URLS)


STORE_OPTIONS = ("migrate", "pool_min_size", "pool_max_size", "statement_timeout_s", "lock_timeout_s", "retry_s")
_KEYWORDS = {"pool_min_size": "min_size", "pool_max_size": "max_size"}


def postgres_url(url: str) -> tuple[str, dict[str, object]]:
    """A PostgreSQL URL in the form libpq takes (``postgresql+psycopg://`` → ``postgresql://``)
    and the store options its query carried (:data:`STORE_OPTIONS`), removed from it."""
    text = url.strip()
    if text.startswith("postgresql+"):  # SQLAlchemy-style "postgresql+psycopg://": libpq wants the plain form
        text = "postgresql://" + text.split("://", 1)[1]
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # "Invalid IPv6 URL": a host with "[" and no "]"
        raise ConfigError("store", f"'{redact_secrets(text)}' is not a URL ({exc})", allowed=ACCEPTED_URLS) from None
    kept, found = [], {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in STORE_OPTIONS:
            found[name] = _option_value(name, value)
        else:
            kept.append((name, value))
    if not found:
        return text, {}
    return urlunsplit(parts._replace(query=urlencode(kept))), found


def _option_value(name: str, value: str) -> object:
    if name == "migrate":
        return value
    if name in ("statement_timeout_s", "lock_timeout_s") and value.lower() in ("none", "off", ""):
        return "none"
    try:
        return int(value) if name.startswith("pool_") else float(value)
    except ValueError:
        raise ConfigError(name, f"got {value!r} in the store URL", allowed="a number") from None


def _postgres_store(url: str, options: dict[str, object]) -> Store:
    """psycopg is an optional dependency, imported only when a PostgreSQL URL is opened."""
    url, from_url = postgres_url(url)
    chosen = {**from_url, **options}
    kwargs = {_KEYWORDS.get(name, name): (None if value == "none" else value) for name, value in chosen.items()}
    try:
        from obsmem.storage.postgres.store import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            "store",
            f"PostgreSQL needs extra packages that are not installed ({exc.name or exc})",
            allowed="pip install 'obsmem[postgres]' (psycopg[binary], psycopg-pool)",
        ) from exc
    return PostgresStore(url, **kwargs)  # type: ignore[arg-type]  # checked by PostgresStore
