"""Lease SQL for :class:`~obsmem.storage.sqlite.store.SQLiteStore`.

Every function here runs on the store's worker thread, inside the transaction the store opened:
``acquire``, ``renew`` and ``release`` inside ``BEGIN IMMEDIATE``, which takes the database's
write lock before reading the lease row, so no other connection, in any process, can change the
row between our read and our write. That is what makes "exactly one of N racing owners gets a
free lease" hold across processes. The rules (who may take or renew, which token) are the shared
functions in :mod:`obsmem.storage.rules`; this module only moves rows.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from pydantic import ValidationError

from obsmem.errors import StorageError
from obsmem.storage.contract import LEASE_PURGE_BATCH, Lease, LeaseCounts, lease_purge_before
from obsmem.storage.rules import acquired_lease, renewed_lease

__all__ = [
    "acquire", "count_by_prefix", "get", "list_by_prefix", "next_token", "page_by_prefix", "purge_expired", "release",
    "renew",
]

Conn = sqlite3.Connection


def _lease(row: sqlite3.Row) -> Lease:
    try:
        return Lease.model_validate(dict(row))
    except ValidationError as exc:
        raise StorageError(f"A stored lease row could not be decoded: {exc}") from exc


def get(conn: Conn, key: str) -> Lease | None:
    row = conn.execute(
        "SELECT key, owner, token, acquired_at, expires_at FROM leases WHERE key = ?", (key,)
    ).fetchone()
    return _lease(row) if row else None


def list_by_prefix(conn: Conn, prefix: str) -> list[Lease]:
    # substr, not LIKE: a prefix holding '%' or '_' is matched literally and case-sensitively.
    rows = conn.execute(
        "SELECT key, owner, token, acquired_at, expires_at FROM leases "
        "WHERE substr(key, 1, length(:prefix)) = :prefix ORDER BY key",
        {"prefix": prefix},
    )
    return [_lease(row) for row in rows]


def page_by_prefix(conn: Conn, prefix: str, limit: int, after_key: str | None) -> list[Lease]:
    """The first ``limit`` leases of ``prefix`` after ``after_key``, by key (the primary key's
    order: BINARY, which is code point order)."""
    sql = (
        "SELECT key, owner, token, acquired_at, expires_at FROM leases "
        "WHERE substr(key, 1, length(:prefix)) = :prefix"
    )
    params: dict[str, object] = {"prefix": prefix, "limit": limit}
    if after_key is not None:
        sql += " AND key > :after"
        params["after"] = after_key
    return [_lease(row) for row in conn.execute(sql + " ORDER BY key LIMIT :limit", params)]


def count_by_prefix(conn: Conn, prefix: str, now: datetime) -> LeaseCounts:
    """How many leases ``prefix`` holds and how many have expired at ``now`` (``expires_at <=
    now``). The ISO times with their offsets are compared as instants in SQL (``julianday``, which
    keeps milliseconds); the few within :data:`_NEAR_DAYS` of ``now`` are read and compared
    exactly, as :meth:`Lease.is_expired` does."""
    params = {"prefix": prefix, "now": now.isoformat(), "near": _NEAR_DAYS}
    where = "FROM leases WHERE substr(key, 1, length(:prefix)) = :prefix"
    row = conn.execute(
        f"SELECT COUNT(*), COALESCE(SUM(julianday(expires_at) < julianday(:now) - :near), 0) {where}", params
    ).fetchone()
    near = conn.execute(
        f"SELECT expires_at {where} AND abs(julianday(expires_at) - julianday(:now)) <= :near", params
    ).fetchall()
    try:
        expired = sum(1 for (at,) in near if datetime.fromisoformat(at) <= now)
    except (TypeError, ValueError) as exc:
        raise StorageError(f"A stored lease's expiry could not be decoded: {exc}") from exc
    return LeaseCounts(int(row[0]), int(row[1]) + expired)


#: Two milliseconds, in days: wider than ``julianday``'s rounding to the millisecond.
_NEAR_DAYS = 0.002 / 86400


def next_token(conn: Conn) -> int:
    conn.execute("UPDATE lease_tokens SET last_token = last_token + 1 WHERE id = 1")
    row = conn.execute("SELECT last_token FROM lease_tokens WHERE id = 1").fetchone()
    if row is None:  # m002 inserts the row; only a hand-edited database lacks it
        raise StorageError("The lease token counter row is missing from table 'lease_tokens'.")
    return int(row[0])


def _store(conn: Conn, lease: Lease) -> None:
    values = lease.model_dump(mode="json")
    conn.execute(
        "INSERT INTO leases (key, owner, token, acquired_at, expires_at) "
        "VALUES (:key, :owner, :token, :acquired_at, :expires_at) "
        "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
        values,
    )


def acquire(conn: Conn, key: str, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    stored = get(conn, key)
    lease = acquired_lease(stored, key, owner, now, expires_at, lambda: next_token(conn))
    if lease is not None:
        _store(conn, lease)
        if stored is None or stored.token != lease.token:  # a new acquisition
            purge_expired(conn, key, now)
    return lease


def purge_expired(conn: Conn, key: str, now: datetime) -> int:
    """Delete up to :data:`LEASE_PURGE_BATCH` leases other than ``key`` expired at or before
    :func:`lease_purge_before` (``now``); how many went. The times are ISO text with their
    offsets, compared as instants (``julianday``; text no date function reads is never purged)."""
    return conn.execute(
        "DELETE FROM leases WHERE key IN (SELECT key FROM leases WHERE key <> :key "
        "AND julianday(expires_at) <= julianday(:cutoff) LIMIT :batch)",
        {"key": key, "cutoff": lease_purge_before(now).isoformat(), "batch": LEASE_PURGE_BATCH},
    ).rowcount


def renew(conn: Conn, key: str, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    lease = renewed_lease(get(conn, key), owner, now, expires_at)
    if lease is not None:
        _store(conn, lease)
    return lease


def release(conn: Conn, key: str, owner: str) -> bool:
    return conn.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner)).rowcount > 0
