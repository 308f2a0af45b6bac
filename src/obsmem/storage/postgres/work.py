"""Work-queue SQL for :class:`~obsmem.storage.postgres.store.PostgresStore`.

Every function runs inside the transaction the store opened. Work items are claimed with
``FOR UPDATE SKIP LOCKED``: a claimer locks the due rows no one else is claiming and skips the
rest, so workers never queue behind each other; under read committed a row that changed since the
query's snapshot is re-checked against the ``WHERE`` after it is locked, so an item just claimed
elsewhere is never claimed twice. Which claim is current is decided by the shared rules in
:mod:`obsmem.storage.rules`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from pydantic import ValidationError

from obsmem.errors import StorageError
from obsmem.storage.contract import DeadWork, WorkCounts, WorkItem
from obsmem.storage.rules import buried_work, holds_claim, released_attempts

__all__ = [
    "bury", "claim", "complete", "count_dead", "count_kinds", "dead_page", "enqueue", "has_kind", "list_dead",
    "list_items", "release", "renew", "retry_dead", "wake",
]

Conn = psycopg.AsyncConnection[Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COLUMNS = (
    "id, kind, target, payload, enqueued_at, available_at, attempts, claimed_by, claim_token, "
    "claim_expires_at, last_error"
)


def _us(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _item(row: Sequence[Any]) -> WorkItem:
    data = dict(zip([c.strip() for c in _COLUMNS.split(",")], row))
    try:
        data["payload"] = json.loads(data["payload"])
        return WorkItem.model_validate(data)
    except (ValidationError, TypeError, ValueError) as exc:  # a corrupted payload column too
        raise StorageError(
            f"A stored work item could not be decoded (table work_items, row id {data.get('id')!r}): {exc}"
        ) from exc


async def _one(conn: Conn, sql: str, params: Sequence[Any] | dict[str, Any]) -> WorkItem | None:
    cur = await conn.execute(sql, params)
    row = await cur.fetchone()
    return _item(row) if row else None


async def _get(conn: Conn, item_id: int) -> WorkItem | None:
    return await _one(conn, f"SELECT {_COLUMNS} FROM work_items WHERE id = %s FOR UPDATE", (item_id,))


async def enqueue(
    conn: Conn, kind: str, target: str, now: datetime, available_at: datetime, payload: dict[str, Any] | None
) -> WorkItem:
    # One statement: insert, or coalesce into the waiting item (the partial unique index).
    item = await _one(
        conn,
        f"INSERT INTO work_items (kind, target, payload, enqueued_at, available_at, available_us) "
        "VALUES (%(kind)s, %(target)s, %(payload)s, %(now)s, %(available_at)s, %(available_us)s) "
        "ON CONFLICT (kind, target) WHERE claimed_by IS NULL DO UPDATE SET "
        "available_at = CASE WHEN excluded.available_us < work_items.available_us "
        "  THEN excluded.available_at ELSE work_items.available_at END, "
        "available_us = LEAST(excluded.available_us, work_items.available_us), "
        "payload = CASE WHEN %(replace)s THEN excluded.payload ELSE work_items.payload END "
        f"RETURNING {_COLUMNS}",
        {"kind": kind, "target": target, "payload": json.dumps(payload or {}), "now": now.isoformat(),
         "available_at": available_at.isoformat(), "available_us": _us(available_at),
         "replace": payload is not None},
    )
    assert item is not None
    return item


async def claim(
    conn: Conn, owner: str, now: datetime, expires_at: datetime, kinds: tuple[str, ...] | None, limit: int
) -> list[WorkItem]:
    kind_filter = "" if kinds is None else "AND kind = ANY(%(kinds)s)"
    cur = await conn.execute(
        "WITH picked AS ("
        "  SELECT id FROM work_items"
        "  WHERE ((claimed_by IS NULL AND available_us <= %(now)s)"
        "      OR (claimed_by IS NOT NULL AND claim_expires_us <= %(now)s)) " + kind_filter +
        "  ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
        "UPDATE work_items AS w SET claimed_by = %(owner)s, claim_token = nextval('work_claim_tokens'), "
        "attempts = w.attempts + 1, claim_expires_at = %(expires_at)s, claim_expires_us = %(expires_us)s "
        f"FROM picked WHERE w.id = picked.id RETURNING {', '.join('w.' + c.strip() for c in _COLUMNS.split(','))}",
        {"now": _us(now), "kinds": list(kinds or ()), "limit": limit, "owner": owner,
         "expires_at": expires_at.isoformat(), "expires_us": _us(expires_at)},
    )
    return sorted((_item(row) for row in await cur.fetchall()), key=lambda item: item.id)


async def renew(conn: Conn, item: WorkItem, now: datetime, expires_at: datetime) -> WorkItem | None:
    stored = await _get(conn, item.id)
    if stored is None or not holds_claim(stored, item) or stored.claim_expired(now):
        return None
    return await _one(
        conn,
        "UPDATE work_items SET claim_expires_at = %s, claim_expires_us = %s WHERE id = %s "
        f"RETURNING {_COLUMNS}",
        (expires_at.isoformat(), _us(expires_at), item.id),
    )


async def complete(conn: Conn, item: WorkItem) -> bool:
    cur = await conn.execute(
        "DELETE FROM work_items WHERE id = %s AND claimed_by = %s AND claim_token = %s",
        (item.id, item.claimed_by, item.claim_token),
    )
    return cur.rowcount > 0


async def release(
    conn: Conn, item: WorkItem, available_at: datetime, error: str | None, count_attempt: bool = True
) -> bool:
    stored = await _get(conn, item.id)
    if stored is None or not holds_claim(stored, item):
        return False
    attempts, error = released_attempts(stored, error, count_attempt)
    waiting = await _one(
        conn,
        f"SELECT {_COLUMNS} FROM work_items WHERE kind = %s AND target = %s AND claimed_by IS NULL FOR UPDATE",
        (stored.kind, stored.target),
    )
    if waiting is not None:  # coalesce into the item already waiting
        await conn.execute("DELETE FROM work_items WHERE id = %s", (item.id,))
        due = min(waiting.available_at, available_at)
        await conn.execute(
            "UPDATE work_items SET available_at = %s, available_us = %s, attempts = %s, last_error = %s "
            "WHERE id = %s",
            (due.isoformat(), _us(due), max(waiting.attempts, attempts), error, waiting.id),
        )
        return True
    # If an enqueue adds a waiting item between our read and this update, the unique index
    # refuses the update and the store retries the whole release, which then coalesces.
    await conn.execute(
        "UPDATE work_items SET claimed_by = NULL, claim_token = NULL, claim_expires_at = NULL, "
        "claim_expires_us = NULL, available_at = %s, available_us = %s, attempts = %s, last_error = %s "
        "WHERE id = %s",
        (available_at.isoformat(), _us(available_at), attempts, error, item.id),
    )
    return True


async def wake(conn: Conn, kind: str, target: str, now: datetime) -> bool:
    """The waiting item of ``kind`` on ``target`` due later than ``now`` becomes due at ``now``
    (one statement; a claim racing it either sees the old time or the new one)."""
    cur = await conn.execute(
        "UPDATE work_items SET available_at = %(now)s, available_us = %(now_us)s "
        "WHERE kind = %(kind)s AND target = %(target)s AND claimed_by IS NULL AND available_us > %(now_us)s",
        {"now": now.isoformat(), "now_us": _us(now), "kind": kind, "target": target},
    )
    return cur.rowcount > 0


_DEAD_COLUMNS = "id, kind, target, payload, enqueued_at, attempts, last_error, failed_at"


def _dead(row: Sequence[Any]) -> DeadWork:
    data = dict(zip([c.strip() for c in _DEAD_COLUMNS.split(",")], row))
    try:
        data["payload"] = json.loads(data["payload"])
        return DeadWork.model_validate(data)
    except (ValidationError, TypeError, ValueError) as exc:
        raise StorageError(
            f"A dead-lettered work item could not be decoded (table dead_work, row id {data.get('id')!r}): {exc}"
        ) from exc


async def bury(conn: Conn, item: WorkItem, now: datetime, error: str | None) -> bool:
    stored = await _get(conn, item.id)
    if stored is None or not holds_claim(stored, item):
        return False
    dead = buried_work(stored, now, error)
    await conn.execute(
        f"INSERT INTO dead_work ({_DEAD_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (id) DO UPDATE SET attempts = excluded.attempts, last_error = excluded.last_error, "
        "failed_at = excluded.failed_at",
        (dead.id, dead.kind, dead.target, json.dumps(dead.payload), dead.enqueued_at.isoformat(), dead.attempts,
         dead.last_error, dead.failed_at.isoformat()),
    )
    await conn.execute("DELETE FROM work_items WHERE id = %s", (item.id,))
    return True


async def list_dead(conn: Conn, kind: str | None) -> list[DeadWork]:
    if kind is None:
        cur = await conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work ORDER BY id")
    else:
        cur = await conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work WHERE kind = %s ORDER BY id", (kind,))
    return [_dead(row) for row in await cur.fetchall()]


async def retry_dead(conn: Conn, dead_id: int, now: datetime) -> WorkItem | None:
    cur = await conn.execute(f"DELETE FROM dead_work WHERE id = %s RETURNING {_DEAD_COLUMNS}", (dead_id,))
    row = await cur.fetchone()
    if row is None:
        return None
    dead = _dead(row)
    return await enqueue(conn, dead.kind, dead.target, now, now, dict(dead.payload))


async def list_items(conn: Conn, kind: str | None) -> list[WorkItem]:
    if kind is None:
        cur = await conn.execute(f"SELECT {_COLUMNS} FROM work_items ORDER BY id")
    else:
        cur = await conn.execute(f"SELECT {_COLUMNS} FROM work_items WHERE kind = %s ORDER BY id", (kind,))
    return [_item(row) for row in await cur.fetchall()]


async def count_kinds(conn: Conn, now: datetime) -> list[WorkCounts]:
    """The queue's depth per kind, counted in SQL (the ISO times cast to instants)."""
    cur = await conn.execute(
        "SELECT kind, count(*) FILTER (WHERE claimed_by IS NULL), "
        "count(*) FILTER (WHERE claimed_by IS NULL AND available_us <= %(now)s), "
        "count(*) FILTER (WHERE claimed_by IS NOT NULL), "
        "count(*) FILTER (WHERE claimed_by IS NOT NULL AND claim_expires_us <= %(now)s), "
        "min(enqueued_at::timestamptz) FROM work_items GROUP BY kind ORDER BY kind COLLATE \"C\"",
        {"now": _us(now)},
    )
    try:
        return [
            WorkCounts(kind=row[0], waiting=row[1], due=row[2], claimed=row[3], expired_claims=row[4],
                       oldest_enqueued_at=row[5])
            for row in await cur.fetchall()
        ]  # fmt: skip
    except ValidationError as exc:
        raise StorageError(f"The work queue's counts could not be decoded (table work_items): {exc}") from exc


async def has_kind(conn: Conn, kind: str) -> bool:
    """Whether an item of ``kind`` is queued: the waiting one from the (kind, target) index, else
    the first claimed one (the claims index holds only the claimed items)."""
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM work_items WHERE kind = %(kind)s AND claimed_by IS NULL) "
        "OR EXISTS (SELECT 1 FROM work_items WHERE kind = %(kind)s AND claimed_by IS NOT NULL)",
        {"kind": kind},
    )
    row = await cur.fetchone()
    return bool(row and row[0])


async def dead_page(conn: Conn, limit: int, before_id: int | None) -> list[DeadWork]:
    """The newest ``limit`` buried items below ``before_id``, newest first (the primary key)."""
    if before_id is None:
        cur = await conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work ORDER BY id DESC LIMIT %s", (limit,))
    else:
        cur = await conn.execute(
            f"SELECT {_DEAD_COLUMNS} FROM dead_work WHERE id < %s ORDER BY id DESC LIMIT %s", (before_id, limit)
        )
    return [_dead(row) for row in await cur.fetchall()]


async def count_dead(conn: Conn) -> int:
    cur = await conn.execute("SELECT count(*) FROM dead_work")
    row = await cur.fetchone()
    return int(row[0]) if row else 0
