"""Observation-record SQL for :class:`~obsmem.storage.postgres.store.PostgresStore`: compare-and-set in
one statement, so no lock is ever held while the client thinks.

Every write is *read, check in Python, then one conditional statement*, on a connection in
autocommit mode:

* The read fetches the stored row. The contract's checks (same identity, cursors only move
  forward, id never reused) run against it in Python, with the rules shared by every adapter.
* The write names the version it checked: ``UPDATE … WHERE id = … AND version = … AND
  superseded_by IS NULL``. Every write bumps the version, so a matching version means the row
  is exactly the one checked; zero rows updated means someone else wrote (or deleted) first,
  and the function re-reads to answer ``stale`` or ``gone``.
* A new generation retires the old head and inserts the new one in one statement (a writable
  CTE feeding the insert), so there are never zero or two heads, and it happens only if the
  retirement matched.

Why not ``SELECT … FOR UPDATE`` in a transaction: an engine runs on an event loop next to
CPU-heavy work (an offline observer, token counting); a transaction left open across an
``await`` holds its row locks until that work yields, and every other process writing the
thread waits. Single statements hold locks only while the server executes them.

The write guard needs no check of its own: a thread-scoped record references its thread
(``thread_ref``) with ``ON DELETE CASCADE``, so deleting the thread deletes the lineage in the
same transaction, an insert for a missing thread fails its foreign key, and an update of a
deleted record matches no row: all three read back as ``gone``. A resource-scoped write that
adds observations for a thread (:func:`~obsmem.storage.rules.advanced_threads`) first checks that
the thread still exists; a delete landing between that check and the write is followed by the
deleting engine's own write to the record, which bumps its version, so the late write matches
no row and reads back as ``stale``, then ``gone``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from pydantic import ValidationError

from obsmem.errors import InvalidInputError, StorageError
from obsmem.storage.contract import ObservationRecord, WriteResult, same_record
from obsmem.storage.rules import (
    advanced_threads,
    check_cursors_forward,
    removed_threads,
    check_same_identity,
    rewritten_generation,
)

__all__ = [
    "create", "create_generation", "decode", "delete_lineage", "get", "head", "list_generations", "rewrite", "update",
]

Conn = psycopg.AsyncConnection[Any]
_SELECT = "SELECT version, superseded_by, doc FROM observation_records"
_COLUMNS = "id, lineage, scope, thread_id, thread_ref, resource_id, generation, version, superseded_by, doc"
_PLACEHOLDERS = ", ".join(["%s"] * 10)
_ATTEMPTS = 20  # re-reads after losing a race before giving up; each loss means another writer won


def _record(row: Sequence[Any]) -> ObservationRecord:
    version, superseded_by, doc = row
    try:
        return ObservationRecord.model_validate({**json.loads(doc), "version": version, "superseded_by": superseded_by})
    except (ValidationError, TypeError, ValueError) as exc:  # a corrupted or hand-edited doc column
        raise StorageError(
            f"A stored ObservationRecord row could not be decoded (table observation_records, row with "
            f"version {version!r}): {exc}"
        ) from exc


def _values(record: ObservationRecord) -> tuple[Any, ...]:
    thread_ref = record.thread_id if record.scope == "thread" else None
    return (record.id, record.lineage, record.scope, record.thread_id, thread_ref, record.resource_id,
            record.generation, record.version, record.superseded_by, json.dumps(record.model_dump(mode="json")))


async def head(conn: Conn, lineage: str) -> ObservationRecord | None:
    cur = await conn.execute(f"{_SELECT} WHERE lineage = %s AND superseded_by IS NULL", (lineage,))
    row = await cur.fetchone()
    return _record(row) if row else None


def decode(row: Sequence[Any]) -> ObservationRecord:
    """The record a ``(version, superseded_by, doc)`` row holds."""
    return _record(row)


async def get(conn: Conn, record_id: str) -> ObservationRecord | None:
    cur = await conn.execute(f"{_SELECT} WHERE id = %s", (record_id,))
    row = await cur.fetchone()
    return _record(row) if row else None


async def list_generations(conn: Conn, lineage: str, limit: int, offset: int) -> list[ObservationRecord]:
    cur = await conn.execute(
        f"{_SELECT} WHERE lineage = %s ORDER BY generation DESC, pk DESC LIMIT %s OFFSET %s", (lineage, limit, offset)
    )
    return [_record(row) for row in await cur.fetchall()]


async def _adds_for_deleted_thread(
    conn: Conn, stored: ObservationRecord | None, record: ObservationRecord
) -> bool:
    threads = sorted(advanced_threads(stored, record))
    if not threads:
        return False
    cur = await conn.execute("SELECT count(*) FROM threads WHERE id = ANY(%s)", (threads,))
    row = await cur.fetchone()
    return row is None or int(row[0]) != len(threads)


async def _deleted(conn: Conn, thread_ids: list[str]) -> set[str]:
    """Which of ``thread_ids`` no longer exist (in the write's transaction)."""
    if not thread_ids:
        return set()
    cur = await conn.execute("SELECT id FROM threads WHERE id = ANY(%s)", (thread_ids,))
    return set(thread_ids) - {row[0] for row in await cur.fetchall()}


async def _refuse_reused_id(conn: Conn, record_id: str) -> None:
    if await get(conn, record_id) is not None:
        raise InvalidInputError(f"Observation record id '{record_id}' is already used; ids are never reused.")


async def create(conn: Conn, record: ObservationRecord) -> WriteResult:
    stored = record.model_copy(update={"superseded_by": None})
    if await _adds_for_deleted_thread(conn, None, record):
        return WriteResult(status="gone", record=None)
    for _ in range(_ATTEMPTS):
        await _refuse_reused_id(conn, record.id)
        try:
            cur = await conn.execute(
                f"INSERT INTO observation_records ({_COLUMNS}) VALUES ({_PLACEHOLDERS}) "
                "ON CONFLICT (lineage) WHERE superseded_by IS NULL DO NOTHING RETURNING id",
                _values(stored),
            )
        except pg_errors.ForeignKeyViolation:
            return WriteResult(status="gone", record=None)  # the thread does not exist (any more)
        if await cur.fetchone() is not None:
            return WriteResult(status="applied", record=stored)
        current = await head(conn, record.lineage)
        if current is not None:
            return WriteResult(status="stale", record=current)
        # The head we collided with was deleted meanwhile: try again.
    raise StorageError(f"Creating the first record of '{record.lineage}' kept colliding with other writers.")


async def update(conn: Conn, record: ObservationRecord, expected_version: int) -> WriteResult:
    for _ in range(_ATTEMPTS):
        stored = await get(conn, record.id)
        if stored is None:
            return WriteResult(status="gone", record=None)
        check_same_identity(stored, record)
        if not stored.is_live or stored.version != expected_version:
            return WriteResult(status="stale", record=await head(conn, stored.lineage))
        check_cursors_forward(stored, record, gone=await _deleted(conn, removed_threads(stored, record)))
        if await _adds_for_deleted_thread(conn, stored, record):
            return WriteResult(status="gone", record=None)
        updated = record.model_copy(
            update={"version": expected_version + 1, "superseded_by": None, "created_at": stored.created_at}
        )
        cur = await conn.execute(
            "UPDATE observation_records SET version = %s, doc = %s "
            "WHERE id = %s AND version = %s AND superseded_by IS NULL",
            (updated.version, json.dumps(updated.model_dump(mode="json")), record.id, expected_version),
        )
        if cur.rowcount == 1:
            return WriteResult(status="applied", record=updated)
        # Lost the race between our read and our write: the re-read answers stale or gone.
    raise StorageError(f"Updating record '{record.id}' kept losing races with other writers.")


async def create_generation(
    conn: Conn, current: ObservationRecord, successor: ObservationRecord, expected_version: int
) -> WriteResult:
    for _ in range(_ATTEMPTS):
        stored = await get(conn, current.id)
        if stored is None:
            return WriteResult(status="gone", record=None)
        if stored.lineage != current.lineage:
            raise InvalidInputError(f"Record '{current.id}' belongs to lineage '{stored.lineage}'.")
        if not stored.is_live or stored.version != expected_version:
            return WriteResult(status="stale", record=await head(conn, stored.lineage))
        check_cursors_forward(stored, successor, gone=await _deleted(conn, removed_threads(stored, successor)))
        if await _adds_for_deleted_thread(conn, stored, successor):
            return WriteResult(status="gone", record=None)
        await _refuse_reused_id(conn, successor.id)
        new_head = successor.model_copy(
            update={"generation": stored.generation + 1, "version": 1, "superseded_by": None}
        )
        # Retire and insert in one statement: the insert reads the CTE, so it happens only if
        # the retirement matched, and the one-head index sees the old head already retired.
        cur = await conn.execute(
            "WITH retired AS (UPDATE observation_records SET superseded_by = %s, version = version + 1 "
            "  WHERE id = %s AND version = %s AND superseded_by IS NULL RETURNING id) "
            f"INSERT INTO observation_records ({_COLUMNS}) SELECT {_PLACEHOLDERS} FROM retired RETURNING id",
            (new_head.id, stored.id, expected_version, *_values(new_head)),
        )
        if await cur.fetchone() is not None:
            return WriteResult(status="applied", record=new_head)
    raise StorageError(f"Reflecting record '{current.id}' kept losing races with other writers.")


async def delete_lineage(conn: Conn, lineage: str) -> int:
    cur = await conn.execute("DELETE FROM observation_records WHERE lineage = %s", (lineage,))
    return cur.rowcount


async def rewrite(conn: Conn, record: ObservationRecord, expected: ObservationRecord | None = None) -> bool:
    """Replace a retired generation's content in place (its version and links stay). With
    ``expected``: only while the stored generation is that one, in one statement (the row is
    written only if its document is still the one read and compared)."""
    cur = await conn.execute(f"{_SELECT} WHERE id = %s", (record.id,))
    row = await cur.fetchone()
    stored = _record(row) if row else None
    if row is None or stored is None or stored.is_live:
        return False
    if expected is not None and not same_record(stored, expected):
        return False
    rewritten = rewritten_generation(stored, record)
    doc = json.dumps(rewritten.model_dump(mode="json"))
    if expected is None:
        cur = await conn.execute(
            "UPDATE observation_records SET doc = %s WHERE id = %s AND superseded_by IS NOT NULL",
            (doc, record.id),
        )
    else:
        cur = await conn.execute(
            "UPDATE observation_records SET doc = %s WHERE id = %s AND superseded_by IS NOT NULL AND doc = %s",
            (doc, record.id, row[-1]),
        )
    return cur.rowcount == 1
