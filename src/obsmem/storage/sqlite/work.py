"""Work-queue SQL for :class:`~obsmem.storage.sqlite.store.SQLiteStore`.

Every function runs on the store's worker thread inside the transaction the store opened;
writes inside ``BEGIN IMMEDIATE``, which holds the database's write lock from the first read,
so of many processes claiming at once each item goes to exactly one. The rules (valid
arguments, what is claimable, which claim is current) are :mod:`obsmem.storage.rules`.
Claim tokens come from the store-wide lease token counter, so they only ever rise.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from obsmem.errors import StorageError
from obsmem.storage.contract import DeadWork, WorkCounts, WorkItem
from obsmem.storage.sqlite.leases import next_token
from obsmem.storage.rules import buried_work, holds_claim, released_attempts

__all__ = [
    "bury", "claim", "complete", "count_dead", "count_kinds", "dead_page", "enqueue", "has_kind", "list_dead",
    "list_items", "release", "renew", "retry_dead", "wake",
]

Conn = sqlite3.Connection
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COLUMNS = (
    "id, kind, target, payload, enqueued_at, available_at, attempts, claimed_by, claim_token, "
    "claim_expires_at, last_error"
)


def _us(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _item(row: sqlite3.Row) -> WorkItem:
    data = dict(row)
    try:
        data["payload"] = json.loads(data["payload"])
        return WorkItem.model_validate(data)
    except (ValidationError, TypeError, ValueError) as exc:  # a corrupted payload column too
        raise StorageError(
            f"A stored work item could not be decoded (table work_items, row id {data.get('id')!r}): {exc}"
        ) from exc


def _get(conn: Conn, item_id: int) -> WorkItem | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM work_items WHERE id = ?", (item_id,)).fetchone()
    return _item(row) if row else None


def _waiting(conn: Conn, kind: str, target: str) -> WorkItem | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM work_items WHERE kind = ? AND target = ? AND claimed_by IS NULL",
        (kind, target),
    ).fetchone()
    return _item(row) if row else None


def _set(conn: Conn, item_id: int, **values: Any) -> None:
    assignments = ", ".join(f"{name} = :{name}" for name in values)
    conn.execute(f"UPDATE work_items SET {assignments} WHERE id = :id", {**values, "id": item_id})


def enqueue(
    conn: Conn, kind: str, target: str, now: datetime, available_at: datetime, payload: dict[str, Any] | None
) -> WorkItem:
    waiting = _waiting(conn, kind, target)
    if waiting is not None:
        due = min(waiting.available_at, available_at)
        values: dict[str, Any] = {"available_at": due.isoformat(), "available_us": _us(due)}
        if payload is not None:
            values["payload"] = json.dumps(payload)
        _set(conn, waiting.id, **values)
        item = _get(conn, waiting.id)
    else:
        cursor = conn.execute(
            "INSERT INTO work_items (kind, target, payload, enqueued_at, available_at, available_us) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (kind, target, json.dumps(payload or {}), now.isoformat(), available_at.isoformat(), _us(available_at)),
        )
        item = _get(conn, int(cursor.lastrowid or 0))
    assert item is not None
    return item


def claim(
    conn: Conn, owner: str, now: datetime, expires_at: datetime, kinds: tuple[str, ...] | None, limit: int
) -> list[WorkItem]:
    sql = (
        f"SELECT {_COLUMNS} FROM work_items WHERE ((claimed_by IS NULL AND available_us <= :now) "
        "OR (claimed_by IS NOT NULL AND claim_expires_us <= :now))"
    )
    params: dict[str, Any] = {"now": _us(now), "limit": limit}
    if kinds is not None:
        names = [f":k{i}" for i in range(len(kinds))]
        sql += f" AND kind IN ({', '.join(names) or 'NULL'})"
        params.update({f"k{i}": kind for i, kind in enumerate(kinds)})
    rows = conn.execute(sql + " ORDER BY id LIMIT :limit", params).fetchall()
    claimed: list[WorkItem] = []
    for row in rows:
        item = _item(row)
        _set(conn, item.id, claimed_by=owner, claim_token=next_token(conn), attempts=item.attempts + 1,
             claim_expires_at=expires_at.isoformat(), claim_expires_us=_us(expires_at))
        taken = _get(conn, item.id)
        assert taken is not None
        claimed.append(taken)
    return claimed


def renew(conn: Conn, item: WorkItem, now: datetime, expires_at: datetime) -> WorkItem | None:
    stored = _get(conn, item.id)
    if stored is None or not holds_claim(stored, item) or stored.claim_expired(now):
        return None
    _set(conn, item.id, claim_expires_at=expires_at.isoformat(), claim_expires_us=_us(expires_at))
    return _get(conn, item.id)


def complete(conn: Conn, item: WorkItem) -> bool:
    stored = _get(conn, item.id)
    if stored is None or not holds_claim(stored, item):
        return False
    conn.execute("DELETE FROM work_items WHERE id = ?", (item.id,))
    return True


def release(
    conn: Conn, item: WorkItem, available_at: datetime, error: str | None, count_attempt: bool = True
) -> bool:
    stored = _get(conn, item.id)
    if stored is None or not holds_claim(stored, item):
        return False
    attempts, last_error = released_attempts(stored, error, count_attempt)
    waiting = _waiting(conn, stored.kind, stored.target)
    if waiting is not None:  # coalesce into the item already waiting
        conn.execute("DELETE FROM work_items WHERE id = ?", (item.id,))
        due = min(waiting.available_at, available_at)
        _set(conn, waiting.id, available_at=due.isoformat(), available_us=_us(due),
             attempts=max(waiting.attempts, attempts), last_error=last_error)
        return True
    _set(conn, item.id, claimed_by=None, claim_token=None, claim_expires_at=None, claim_expires_us=None,
         available_at=available_at.isoformat(), available_us=_us(available_at), attempts=attempts,
         last_error=last_error)
    return True


def wake(conn: Conn, kind: str, target: str, now: datetime) -> bool:
    """The waiting item of ``kind`` on ``target`` due later than ``now`` becomes due at ``now``."""
    cursor = conn.execute(
        "UPDATE work_items SET available_at = ?, available_us = ? "
        "WHERE kind = ? AND target = ? AND claimed_by IS NULL AND available_us > ?",
        (now.isoformat(), _us(now), kind, target, _us(now)),
    )
    return cursor.rowcount > 0


_DEAD_COLUMNS = "id, kind, target, payload, enqueued_at, attempts, last_error, failed_at"


def _dead(row: sqlite3.Row) -> DeadWork:
    data = dict(row)
    try:
        data["payload"] = json.loads(data["payload"])
        return DeadWork.model_validate(data)
    except (ValidationError, TypeError, ValueError) as exc:
        raise StorageError(
            f"A dead-lettered work item could not be decoded (table dead_work, row id {data.get('id')!r}): {exc}"
        ) from exc


def bury(conn: Conn, item: WorkItem, now: datetime, error: str | None) -> bool:
    stored = _get(conn, item.id)
    if stored is None or not holds_claim(stored, item):
        return False
    dead = buried_work(stored, now, error)
    conn.execute(
        f"INSERT OR REPLACE INTO dead_work ({_DEAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (dead.id, dead.kind, dead.target, json.dumps(dead.payload), dead.enqueued_at.isoformat(), dead.attempts,
         dead.last_error, dead.failed_at.isoformat()),
    )
    conn.execute("DELETE FROM work_items WHERE id = ?", (item.id,))
    return True


def list_dead(conn: Conn, kind: str | None) -> list[DeadWork]:
    if kind is None:
        rows = conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work ORDER BY id")
    else:
        rows = conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work WHERE kind = ? ORDER BY id", (kind,))
    return [_dead(row) for row in rows]


def retry_dead(conn: Conn, dead_id: int, now: datetime) -> WorkItem | None:
    row = conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work WHERE id = ?", (dead_id,)).fetchone()
    if row is None:
        return None
    dead = _dead(row)
    conn.execute("DELETE FROM dead_work WHERE id = ?", (dead_id,))
    return enqueue(conn, dead.kind, dead.target, now, now, dict(dead.payload))


def list_items(conn: Conn, kind: str | None) -> list[WorkItem]:
    if kind is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM work_items ORDER BY id")
    else:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM work_items WHERE kind = ? ORDER BY id", (kind,))
    return [_item(row) for row in rows]


def count_kinds(conn: Conn, now: datetime) -> list[WorkCounts]:
    """The queue's depth per kind, counted in SQL. The oldest item's ``enqueued_at`` is read as
    written (SQLite takes the bare column from the row holding the ``min()``), the instants
    compared as ``julianday`` (ISO text with any offset)."""
    rows = conn.execute(
        "SELECT kind, SUM(claimed_by IS NULL), SUM(claimed_by IS NULL AND available_us <= :now), "
        "SUM(claimed_by IS NOT NULL), SUM(claimed_by IS NOT NULL AND claim_expires_us <= :now), "
        "MIN(julianday(enqueued_at)), enqueued_at FROM work_items GROUP BY kind ORDER BY kind",
        {"now": _us(now)},
    ).fetchall()
    try:
        return [
            WorkCounts(kind=row[0], waiting=row[1], due=row[2], claimed=row[3], expired_claims=row[4],
                       oldest_enqueued_at=row[6])
            for row in rows
        ]  # fmt: skip
    except ValidationError as exc:
        raise StorageError(f"The work queue's counts could not be decoded (table work_items): {exc}") from exc


def has_kind(conn: Conn, kind: str) -> bool:
    """Whether an item of ``kind`` is queued: the waiting one from the (kind, target) index, else
    the first claimed one."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM work_items WHERE kind = :kind AND claimed_by IS NULL) "
        "OR EXISTS (SELECT 1 FROM work_items WHERE kind = :kind AND claimed_by IS NOT NULL)",
        {"kind": kind},
    ).fetchone()
    return bool(row[0])


def dead_page(conn: Conn, limit: int, before_id: int | None) -> list[DeadWork]:
    """The newest ``limit`` buried items below ``before_id``, newest first (the primary key)."""
    if before_id is None:
        rows = conn.execute(f"SELECT {_DEAD_COLUMNS} FROM dead_work ORDER BY id DESC LIMIT ?", (limit,))
    else:
        rows = conn.execute(
            f"SELECT {_DEAD_COLUMNS} FROM dead_work WHERE id < ? ORDER BY id DESC LIMIT ?", (before_id, limit)
        )
    return [_dead(row) for row in rows]


def count_dead(conn: Conn) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM dead_work").fetchone()[0])
