"""API keys for ``obsmem serve``: created, listed, verified and revoked; stored hashed.

A key reads ``om_<key_id>_<secret>``. Only ``sha256(secret)`` is stored (with the key id, its
org, optional resource, read-only and admin flags, and when it was created and revoked); the
secret is shown once, when the key is created, and cannot be recovered.

The table ``obsmem_api_keys`` lives in the same database as the memory store (a SQLite file or
a PostgreSQL database), but belongs to the server: it is created by :meth:`KeyStore.setup` (on
``obsmem keys create`` and at server start), not by the store's migrations, so the storage
contract stays free of anything only the service needs. ``memory://`` keeps keys in the process
(tests and ``--dev`` only). Every statement is parameterised; revocation is compare-and-set
(``... WHERE revoked_at IS NULL``), so two concurrent revocations report one success.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
import sqlite3
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import UTC, datetime
import builtins
from pathlib import Path
from typing import Any

from obsmem.errors import ConfigError, InvalidInputError
from obsmem.files import prepare_database_file

__all__ = [
    "ApiKey",
    "KeyStore",
    "MemoryKeyStore",
    "PostgresKeyStore",
    "SQLiteKeyStore",
    "key_store_for",
    "parse_secret",
]

TABLE = "obsmem_api_keys"
_KEY = re.compile(r"^om_([0-9a-f]{16})_([A-Za-z0-9_-]{20,100})$")
_COLUMNS = "key_id, secret_sha256, org_id, resource_id, read_only, admin, label, created_at, revoked_at"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key as stored (never its secret). ``resource_id`` None: every resource of the org."""

    key_id: str
    org_id: str
    resource_id: str | None = None
    read_only: bool = False
    admin: bool = False
    label: str | None = None
    created_at: datetime | None = None
    revoked_at: datetime | None = None
    secret_sha256: str = ""

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def public(self) -> dict[str, Any]:
        """The key as JSON for listings: everything but the hash."""
        return {
            "key_id": self.key_id, "org_id": self.org_id, "resource_id": self.resource_id,
            "read_only": self.read_only, "admin": self.admin, "label": self.label,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }  # fmt: skip


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_secret(token: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed key, else None."""
    match = _KEY.match(token.strip())
    return (match.group(1), match.group(2)) if match else None


def _check_name(value: str | None, argument: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InvalidInputError(f"Invalid {argument}: expected a non-empty string of at most 200 characters",
                                argument=argument)  # fmt: skip


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


#: The indexes a page of keys is read from, in the listing's order (creation time, then key id):
#: every key, an org's, a resource's.
_PAGE_INDEXES = (
    ("order", "created_at, key_id"), ("org_order", "org_id, created_at, key_id"),
    ("resource_order", "resource_id, created_at, key_id"),
)


def _page_sql(
    param: str, org_id: str | None, resource_id: str | None, limit: int, after: str | None
) -> tuple[str, list[Any]]:
    """The SQL stores' query for :meth:`KeyStore.page` (``param`` is their placeholder)."""
    conditions: list[str] = []
    params: list[Any] = []
    if org_id is not None:
        conditions.append(f"org_id = {param}")
        params.append(org_id)
    if resource_id is not None:
        conditions.append(f"resource_id = {param}")
        params.append(resource_id)
    if after is not None:
        conditions.append(f"(created_at, key_id) > (SELECT created_at, key_id FROM {TABLE} WHERE key_id = {param})")
        params.append(after)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"SELECT {_COLUMNS} FROM {TABLE}{where} ORDER BY created_at, key_id LIMIT {param}", [*params, limit]


def _row(row: tuple[Any, ...]) -> ApiKey:
    key_id, digest, org, resource, read_only, admin, label, created, revoked = row
    return ApiKey(
        key_id=key_id, secret_sha256=digest, org_id=org, resource_id=resource, read_only=bool(read_only),
        admin=bool(admin), label=label, created_at=_time(created), revoked_at=_time(revoked),
    )  # fmt: skip


class KeyStore(ABC):
    """Where keys live. Subclasses store rows; this class makes, checks and revokes keys."""

    async def setup(self) -> None:
        """Create the table when missing (idempotent)."""
        await asyncio.to_thread(self._setup)

    async def create(
        self, org_id: str, *, resource_id: str | None = None, read_only: bool = False, admin: bool = False,
        label: str | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key and its full secret (``om_<id>_<secret>``), which is shown only now."""
        _check_name(org_id, "org_id")
        _check_name(resource_id, "resource_id", optional=True)
        _check_name(label, "label", optional=True)
        if admin and read_only:
            raise InvalidInputError("An admin key manages keys, so it cannot be read-only", argument="admin")
        secret = secrets.token_urlsafe(32)
        key = ApiKey(
            key_id=secrets.token_hex(8), org_id=org_id, resource_id=resource_id, read_only=read_only,
            admin=admin, label=label, created_at=datetime.now(UTC), secret_sha256=_digest(secret),
        )  # fmt: skip
        await asyncio.to_thread(self._insert, key)
        return key, f"om_{key.key_id}_{secret}"

    async def verify(self, token: str) -> ApiKey | None:
        """The live key ``token`` is, or None (malformed, unknown, wrong secret or revoked)."""
        parsed = parse_secret(token)
        if parsed is None:
            return None
        key = await self.get(parsed[0])
        if key is None or key.revoked:
            return None
        if not hmac.compare_digest(key.secret_sha256, _digest(parsed[1])):
            return None
        return key

    async def get(self, key_id: str) -> ApiKey | None:
        return await asyncio.to_thread(self._get, key_id)

    async def list(self, org_id: str | None = None) -> list[ApiKey]:
        """Keys (of ``org_id``, or all), oldest first."""
        return await asyncio.to_thread(self._list, org_id)

    async def page(
        self, org_id: str | None = None, *, resource_id: str | None = None, limit: int, after: str | None = None
    ) -> builtins.list[ApiKey]:
        """At most ``limit`` keys (of ``org_id``, or every org; bound to ``resource_id`` when
        given), oldest first (creation time, then key id), after the key ``after`` in that order:
        the next page of a listing reads that page's rows only, from an index. ``after`` must be
        a key of that listing (:meth:`get` it and check first); keys are never deleted (revoked
        ones stay), so a cursor never goes missing."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit must be a whole number of at least 1, got {limit!r}", argument="limit")
        return await asyncio.to_thread(self._page, org_id, resource_id, limit, after)

    async def revoke(self, key_id: str, *, org_id: str | None = None) -> bool:
        """Revoke a live key (of ``org_id`` when given). False: no such live key."""
        return await asyncio.to_thread(self._revoke, key_id, org_id, datetime.now(UTC))

    async def resource_orgs(self, resource_id: str) -> set[str]:
        """The orgs of the live keys bound to ``resource_id``: a key bound to a resource claims it
        for its org (see :mod:`obsmem.server.access`). One indexed read."""
        return await asyncio.to_thread(self._resource_orgs, resource_id)

    async def claimed_by_another(self, resource_id: str, org_id: str) -> bool:
        """Whether a live key of an org other than ``org_id`` is bound to ``resource_id``."""
        return bool(await self.resource_orgs(resource_id) - {org_id})

    async def close(self) -> None:
        return None

    @abstractmethod
    def _setup(self) -> None: ...

    @abstractmethod
    def _insert(self, key: ApiKey) -> None: ...

    @abstractmethod
    def _get(self, key_id: str) -> ApiKey | None: ...

    @abstractmethod
    def _list(self, org_id: str | None) -> builtins.list[ApiKey]: ...

    @abstractmethod
    def _page(
        self, org_id: str | None, resource_id: str | None, limit: int, after: str | None
    ) -> builtins.list[ApiKey]: ...

    @abstractmethod
    def _revoke(self, key_id: str, org_id: str | None, now: datetime) -> bool: ...

    @abstractmethod
    def _resource_orgs(self, resource_id: str) -> set[str]: ...


class MemoryKeyStore(KeyStore):
    """Keys in this process only (``memory://`` stores: tests and ``--dev``)."""

    def __init__(self) -> None:
        self._keys: dict[str, ApiKey] = {}

    def _setup(self) -> None:
        return None

    def _insert(self, key: ApiKey) -> None:
        self._keys[key.key_id] = key

    def _get(self, key_id: str) -> ApiKey | None:
        return self._keys.get(key_id)

    def _list(self, org_id: str | None) -> builtins.list[ApiKey]:
        return [k for k in self._keys.values() if org_id is None or k.org_id == org_id]

    def _page(
        self, org_id: str | None, resource_id: str | None, limit: int, after: str | None
    ) -> builtins.list[ApiKey]:
        def order(key: ApiKey) -> tuple[datetime, str]:
            return key.created_at or datetime.min.replace(tzinfo=UTC), key.key_id

        listed = sorted(
            (k for k in self._keys.values()
             if (org_id is None or k.org_id == org_id) and (resource_id is None or k.resource_id == resource_id)),
            key=order,
        )  # fmt: skip
        cursor = self._keys.get(after) if after is not None else None
        if after is not None:
            if cursor is None:
                return []
            listed = [k for k in listed if order(k) > order(cursor)]
        return listed[:limit]

    def _revoke(self, key_id: str, org_id: str | None, now: datetime) -> bool:
        key = self._keys.get(key_id)
        if key is None or key.revoked or (org_id is not None and key.org_id != org_id):
            return False
        self._keys[key_id] = replace(key, revoked_at=now)
        return True

    def _resource_orgs(self, resource_id: str) -> set[str]:
        return {k.org_id for k in self._keys.values() if k.resource_id == resource_id and not k.revoked}


class SQLiteKeyStore(KeyStore):
    """The table in the memory store's SQLite file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30)
        connection.execute("PRAGMA busy_timeout = 30000")
        return connection

    def _setup(self) -> None:
        prepare_database_file(Path(self.path))  # a new store: its folder 0700 and file 0600, as the memory's
        with self._connect() as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (key_id TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, "
                "org_id TEXT NOT NULL, resource_id TEXT, read_only INTEGER NOT NULL, admin INTEGER NOT NULL, "
                "label TEXT, created_at TEXT NOT NULL, revoked_at TEXT)"
            )
            db.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_resource ON {TABLE} (resource_id)")
            for name, columns in _PAGE_INDEXES:
                db.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_{name} ON {TABLE} ({columns})")
        db.close()

    def _insert(self, key: ApiKey) -> None:
        assert key.created_at is not None
        with self._connect() as db:
            db.execute(
                f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                (key.key_id, key.secret_sha256, key.org_id, key.resource_id, int(key.read_only), int(key.admin),
                 key.label, key.created_at.isoformat()),
            )  # fmt: skip
        db.close()

    def _get(self, key_id: str) -> ApiKey | None:
        with self._connect() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE key_id = ?", (key_id,)).fetchone()
        db.close()
        return _row(row) if row else None

    def _list(self, org_id: str | None) -> builtins.list[ApiKey]:
        with self._connect() as db:
            if org_id is None:
                rows = db.execute(f"SELECT {_COLUMNS} FROM {TABLE} ORDER BY created_at").fetchall()
            else:
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM {TABLE} WHERE org_id = ? ORDER BY created_at", (org_id,)
                ).fetchall()
        db.close()
        return [_row(r) for r in rows]

    def _page(
        self, org_id: str | None, resource_id: str | None, limit: int, after: str | None
    ) -> builtins.list[ApiKey]:
        sql, params = _page_sql("?", org_id, resource_id, limit, after)
        with self._connect() as db:
            rows = db.execute(sql, params).fetchall()
        db.close()
        return [_row(r) for r in rows]

    def _revoke(self, key_id: str, org_id: str | None, now: datetime) -> bool:
        with self._connect() as db:
            cursor = db.execute(
                f"UPDATE {TABLE} SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL "
                "AND (? IS NULL OR org_id = ?)",
                (now.isoformat(), key_id, org_id, org_id),
            )
            changed = cursor.rowcount == 1
        db.close()
        return changed

    def _resource_orgs(self, resource_id: str) -> set[str]:
        with self._connect() as db:
            rows = db.execute(
                f"SELECT DISTINCT org_id FROM {TABLE} WHERE resource_id = ? AND revoked_at IS NULL", (resource_id,)
            ).fetchall()
        db.close()
        return {row[0] for row in rows}


class PostgresKeyStore(KeyStore):
    """The table in the memory store's PostgreSQL database, over a small psycopg pool (opened on
    first use, closed by :meth:`close`): a key is checked on every request."""

    def __init__(self, url: str, *, max_size: int = 4) -> None:
        self.url = url
        self.max_size = max_size
        self._pool: Any = None
        self._opening = threading.Lock()  # one pool, though the first calls come from several threads

    def _connect(self) -> Any:
        with self._opening:
            return self._pooled().connection()

    def _pooled(self) -> Any:
        if self._pool is None:
            try:
                from psycopg_pool import ConnectionPool
            except ImportError as exc:  # pragma: no cover - the postgres extra is installed with the store
                raise ConfigError("store", "PostgreSQL keys need psycopg and psycopg-pool",
                                  allowed="pip install 'obsmem[postgres]'") from exc  # fmt: skip
            self._pool = ConnectionPool(self.url, kwargs={"autocommit": True}, min_size=1, max_size=self.max_size,
                                        open=True)  # fmt: skip
        return self._pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.close)

    def _setup(self) -> None:
        with self._connect() as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (key_id TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, "
                "org_id TEXT NOT NULL, resource_id TEXT, read_only BOOLEAN NOT NULL, admin BOOLEAN NOT NULL, "
                "label TEXT, created_at TIMESTAMPTZ NOT NULL, revoked_at TIMESTAMPTZ)"
            )
            db.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_resource ON {TABLE} (resource_id)")
            for name, columns in _PAGE_INDEXES:
                db.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_{name} ON {TABLE} ({columns})")

    def _insert(self, key: ApiKey) -> None:
        with self._connect() as db:
            db.execute(
                f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, NULL)",
                (key.key_id, key.secret_sha256, key.org_id, key.resource_id, key.read_only, key.admin, key.label,
                 key.created_at),
            )  # fmt: skip

    def _get(self, key_id: str) -> ApiKey | None:
        with self._connect() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE key_id = %s", (key_id,)).fetchone()
        return _row(tuple(row)) if row else None

    def _list(self, org_id: str | None) -> builtins.list[ApiKey]:
        with self._connect() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM {TABLE} WHERE (%s::text IS NULL OR org_id = %s) ORDER BY created_at",
                (org_id, org_id),
            ).fetchall()
        return [_row(tuple(r)) for r in rows]

    def _page(
        self, org_id: str | None, resource_id: str | None, limit: int, after: str | None
    ) -> builtins.list[ApiKey]:
        sql, params = _page_sql("%s", org_id, resource_id, limit, after)
        with self._connect() as db:
            rows = db.execute(sql, params).fetchall()
        return [_row(tuple(r)) for r in rows]

    def _revoke(self, key_id: str, org_id: str | None, now: datetime) -> bool:
        with self._connect() as db:
            cursor = db.execute(
                f"UPDATE {TABLE} SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL "
                "AND (%s::text IS NULL OR org_id = %s)",
                (now, key_id, org_id, org_id),
            )
            return bool(cursor.rowcount == 1)

    def _resource_orgs(self, resource_id: str) -> set[str]:
        with self._connect() as db:
            rows = db.execute(
                f"SELECT DISTINCT org_id FROM {TABLE} WHERE resource_id = %s AND revoked_at IS NULL", (resource_id,)
            ).fetchall()
        return {row[0] for row in rows}


def key_store_for(store_url: str) -> KeyStore:
    """The key store living beside the memory store at ``store_url`` (a Store's ``url``)."""
    if store_url.startswith("sqlite:///"):
        return SQLiteKeyStore(store_url[len("sqlite:///") :])
    if store_url.startswith(("postgresql://", "postgres://")):
        return PostgresKeyStore(store_url)
    if store_url == "memory://":
        return MemoryKeyStore()
    raise ConfigError("store", f"no API key table for the store {store_url!r}",
                      allowed="a SQLite file, a postgresql:// URL or memory://")  # fmt: skip
