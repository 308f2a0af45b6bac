"""Lease SQL for :class:`~obsmem.storage.postgres.store.PostgresStore`.

Every function runs inside the transaction the store opened. Leases serialise on
``pg_advisory_xact_lock`` for their key (held until commit): of many acquirers of one key, in any
number of processes, one reads and writes at a time, so exactly one gets a free key. Who may take
or renew is decided by the shared rules in :mod:`obsmem.storage.rules` against the caller's clock;
this module only moves rows. Fencing tokens come from a one-row counter, so they rise in commit
order across all keys, as on SQLite.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from pydantic import ValidationError

from obsmem.errors import StorageError
from obsmem.storage.contract import LEASE_PURGE_BATCH, Lease, LeaseCounts, lease_purge_before
from obsmem.storage.rules import acquired_lease, renewed_lease

__all__ = ["acquire", "count_by_prefix", "get", "list_by_prefix", "page_by_prefix", "release", "renew"]

Conn = psycopg.AsyncConnection[Any]
_COLUMNS = "key, owner, token, acquired_at, expires_at"


def _lease(row: Sequence[Any]) -> Lease:
    try:
        return Lease.model_validate(dict(zip(("key", "owner", "token", "acquired_at", "expires_at"), row)))
    except ValidationError as exc:
        raise StorageError(f"A stored lease row could not be decoded: {exc}") from exc


async def get(conn: Conn, key: str) -> Lease | None:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM leases WHERE key = %s", (key,))
    row = await cur.fetchone()
    return _lease(row) if row else None


async def list_by_prefix(conn: Conn, prefix: str) -> list[Lease]:
    # left(), not LIKE: a prefix holding '%' or '_' is matched literally and case-sensitively.
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM leases WHERE left(key, char_length(%s)) = %s ORDER BY key COLLATE \"C\"",
        (prefix, prefix),
    )
    return [_lease(row) for row in await cur.fetchall()]


async def page_by_prefix(conn: Conn, prefix: str, limit: int, after_key: str | None) -> list[Lease]:
    """The first ``limit`` leases of ``prefix`` after ``after_key``, by key (``COLLATE "C"``: code
    point order, as ``list_by_prefix``)."""
    sql = f"SELECT {_COLUMNS} FROM leases WHERE left(key, char_length(%(prefix)s)) = %(prefix)s"
    params: dict[str, object] = {"prefix": prefix, "limit": limit}
    if after_key is not None:
        sql += " AND key COLLATE \"C\" > %(after)s"
        params["after"] = after_key
    cur = await conn.execute(sql + " ORDER BY key COLLATE \"C\" LIMIT %(limit)s", params)
    return [_lease(row) for row in await cur.fetchall()]


async def count_by_prefix(conn: Conn, prefix: str, now: datetime) -> LeaseCounts:
    """How many leases ``prefix`` holds and how many have expired at ``now`` (the ISO times cast
    to instants)."""
    cur = await conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE expires_at::timestamptz <= %(now)s) FROM leases "
        "WHERE left(key, char_length(%(prefix)s)) = %(prefix)s",
        {"prefix": prefix, "now": now},
    )
    row = await cur.fetchone()
    return LeaseCounts(int(row[0]), int(row[1])) if row else LeaseCounts(0, 0)


async def _lock_key(conn: Conn, key: str) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('obsmem.lease:' || %s, 0))", (key,))


async def _store(conn: Conn, lease: Lease) -> None:
    values = lease.model_dump(mode="json")
    await conn.execute(
        f"INSERT INTO leases ({_COLUMNS}) VALUES (%(key)s, %(owner)s, %(token)s, %(acquired_at)s, "
        "%(expires_at)s) ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
        values,
    )


# A new acquisition's row, with its token drawn from the counter in the same statement.
_STORE_NEW = (
    "WITH drawn AS (UPDATE lease_tokens SET last_token = last_token + 1 WHERE id = 1 RETURNING last_token) "
    f"INSERT INTO leases ({_COLUMNS}) SELECT %(key)s, %(owner)s, drawn.last_token, %(acquired_at)s, "
    "%(expires_at)s FROM drawn ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
    "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at RETURNING token"
)


# Up to LEASE_PURGE_BATCH other leases expired long ago (see contract.LEASE_PURGE_AFTER_S), deleted
# by a new acquisition. SKIP LOCKED: a row another transaction is writing (its key being taken)
# is left, so two acquirers purging at once never wait on each other's rows (no deadlock).
_PURGE = (
    "DELETE FROM leases WHERE key IN (SELECT key FROM leases WHERE key <> %(key)s "
    "AND expires_at::timestamptz <= %(cutoff)s LIMIT %(batch)s FOR UPDATE SKIP LOCKED)"
)


async def acquire(conn: Conn, key: str, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    """Lock the key, read it, decide by the rules, write: one transaction whose statements go in
    pipeline mode, so an acquisition costs two round trips (BEGIN, the lock and the read; then the
    write, a new acquisition's purge of leases long expired, and COMMIT) instead of six. Runs on an autocommit connection, outside ``_run``'s
    transaction. Repeating it after a lost connection is safe: if the first one committed, the
    key is ours and unexpired, and the repeat renews it with the same token."""
    cur: psycopg.AsyncCursor[Any] | None = None
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            await _lock_key(conn, key)
            stored = await get(conn, key)  # the first round trip: BEGIN, the lock, this read
            fresh = stored is None or stored.is_expired(now)
            lease = acquired_lease(stored, key, owner, now, expires_at, lambda: 0)  # 0: drawn by the write
            if lease is None and fresh:  # pragma: no cover - a free or expired key is always granted
                raise StorageError("A free lease key was refused.")
            if lease is not None and fresh:
                cur = await conn.execute(_STORE_NEW, lease.model_dump(mode="json"))
                purge = {"key": key, "cutoff": lease_purge_before(now), "batch": LEASE_PURGE_BATCH}
                await conn.execute(_PURGE, purge)
            elif lease is not None:  # the holder again: same token, later expiry
                await _store(conn, lease)
            await conn.execute("COMMIT")  # leaving the pipeline sends these: the second round trip
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("ROLLBACK")
        raise
    if cur is None or lease is None:
        return lease
    row = await cur.fetchone()
    if row is None:
        raise StorageError("The lease token counter row is missing from table 'lease_tokens'.")
    return lease.model_copy(update={"token": int(row[0])})


async def renew(conn: Conn, key: str, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    await _lock_key(conn, key)
    lease = renewed_lease(await get(conn, key), owner, now, expires_at)
    if lease is not None:
        await _store(conn, lease)
    return lease


async def release(conn: Conn, key: str, owner: str) -> bool:
    cur = await conn.execute("DELETE FROM leases WHERE key = %s AND owner = %s", (key, owner))
    return cur.rowcount > 0
