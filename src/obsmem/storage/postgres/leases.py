"""Lease SQL for :class:`~obsmem.storage.postgres.store.PostgresStore`.

Every function runs inside the transaction the store opened. Leases serialise on
``pg_advisory_xact_lock`` for their key (held until commit): of many acquirers of one key, in any
number of processes, one reads and writes at a time, so exactly one gets a free key. Who may take
or renew is decided by the shared rules in :mod:`obsmem.storage.rules` against the caller's clock;
this module only moves rows. Fencing tokens come from a one-row counter, so they rise in commit
order across all keys, as on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from pydantic import ValidationError

from obsmem.errors import StorageError
from obsmem.storage.contract import Lease
from obsmem.storage.rules import acquired_lease, renewed_lease

__all__ = ["acquire", "get", "list_by_prefix", "release", "renew"]

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


async def _lock_key(conn: Conn, key: str) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('obsmem.lease:' || %s, 0))", (key,))


async def _next_token(conn: Conn) -> int:
    cur = await conn.execute("UPDATE lease_tokens SET last_token = last_token + 1 WHERE id = 1 RETURNING last_token")
    row = await cur.fetchone()
    if row is None:
        raise StorageError("The lease token counter row is missing from table 'lease_tokens'.")
    return int(row[0])


async def _store(conn: Conn, lease: Lease) -> None:
    values = lease.model_dump(mode="json")
    await conn.execute(
        f"INSERT INTO leases ({_COLUMNS}) VALUES (%(key)s, %(owner)s, %(token)s, %(acquired_at)s, "
        "%(expires_at)s) ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
        values,
    )


async def acquire(conn: Conn, key: str, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    await _lock_key(conn, key)
    stored = await get(conn, key)
    tokens: list[int] = []
    if stored is None or stored.is_expired(now):
        tokens.append(await _next_token(conn))  # a new acquisition, if the rules agree below
    lease = acquired_lease(stored, key, owner, now, expires_at, lambda: tokens[0])
    if lease is not None:
        await _store(conn, lease)
    elif tokens:  # pragma: no cover - a free or expired key is always granted
        raise StorageError("A lease token was drawn for a refused acquisition.")
    return lease


async def renew(conn: Conn, key: str, owner: str, now: datetime, expires_at: datetime) -> Lease | None:
    await _lock_key(conn, key)
    lease = renewed_lease(await get(conn, key), owner, now, expires_at)
    if lease is not None:
        await _store(conn, lease)
    return lease


async def release(conn: Conn, key: str, owner: str) -> bool:
    cur = await conn.execute("DELETE FROM leases WHERE key = %s AND owner = %s", (key, owner))
    return cur.rowcount > 0
