"""The message store's SQLite schema: numbered steps recorded in ``_obsmem_migrations``.

The framework (numbered steps, one transaction per step with its record, refusing a newer
database) is :mod:`obsmem.migrations`; its names are re-exported here for the code and tests
that import them from this module. :data:`SQLITE_MIGRATIONS` is the message store's list;
PostgreSQL's is :mod:`obsmem.storage.postgres.migrations`.
"""

from __future__ import annotations

import sqlite3

from obsmem.errors import ConfigError
from obsmem.migrations import (
    MIGRATIONS_TABLE,
    SQLITE,
    Dialect,
    Migration,
    MigrationSet,
    SQLConnection,
    SQLiteDialect,
)

__all__ = [
    "MIGRATIONS_TABLE",
    "SQLITE",
    "SQLITE_MIGRATIONS",
    "Dialect",
    "Migration",
    "MigrationSet",
    "SQLConnection",
    "SQLiteDialect",
    "MIGRATE_MODES",
    "migrate",
    "migrate_mode",
    "pending",
]


SQLITE_MIGRATIONS: MigrationSet[sqlite3.Connection] = MigrationSet(SQLITE)


MIGRATE_MODES = ("auto", "check", "never")
"""How a store opened by an application treats its schema: ``auto`` applies pending migrations,
``check`` only reads them and refuses a schema that is behind (the application's database user
needs no DDL rights: run ``obsmem migrate``), ``never`` does neither."""


def migrate_mode(value: object) -> str:
    """``migrate=`` as one of :data:`MIGRATE_MODES` (True is "auto", False "never")."""
    if value is True:
        return "auto"
    if value is False:
        return "never"
    if isinstance(value, str) and value in MIGRATE_MODES:
        return value
    raise ConfigError("migrate", f"got {value!r}", allowed="'auto' (or True), 'check', 'never' (or False)")


def pending(conn: sqlite3.Connection) -> list[str]:
    """Names of the SQLite migrations not yet applied (read-only)."""
    return [m.name for m in SQLITE_MIGRATIONS.pending(conn)]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Bring an SQLite database up to date; returns the names applied now."""
    return SQLITE_MIGRATIONS.migrate(conn)


# -- SQLite migrations ----------------------------------------------------------------------
# Conventions: JSON documents live in TEXT columns; datetimes are ISO 8601 strings *with*
# their offset (so they round-trip exactly) plus an integer microsecond column where rows must
# be ordered by time (ISO strings with different offsets do not sort chronologically).


@SQLITE_MIGRATIONS.register
def m001_initial(conn: sqlite3.Connection) -> None:
    statements = [
        """CREATE TABLE threads (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            resource_id TEXT NOT NULL,
            org_id TEXT,
            title TEXT,
            title_pinned INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            created_us INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 1
        )""",
        "CREATE INDEX threads_by_resource ON threads (resource_id, created_us, pk)",
        # seq is the store-wide insertion counter; AUTOINCREMENT means a seq is never reused,
        # even after the newest messages are deleted, so cursors stay meaningful.
        """CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            parts TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX messages_by_thread ON messages (thread_id, seq)",
        """CREATE TABLE observation_records (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            lineage TEXT NOT NULL,
            scope TEXT NOT NULL CHECK (scope IN ('thread', 'resource')),
            thread_id TEXT,
            resource_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            origin TEXT NOT NULL,
            version INTEGER NOT NULL,
            superseded_by TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            active_observations TEXT NOT NULL,
            observation_tokens INTEGER NOT NULL,
            total_tokens_observed INTEGER NOT NULL,
            pending_message_tokens INTEGER NOT NULL,
            threads TEXT NOT NULL,
            buffered_chunks TEXT NOT NULL,
            buffered_reflection TEXT,
            reflection_suppressed_at INTEGER,
            config TEXT NOT NULL,
            metadata TEXT NOT NULL
        )""",
        # The single-live-head rule as a constraint: a bug that would create a second head
        # fails with an integrity error instead of forking the lineage.
        (
            "CREATE UNIQUE INDEX observation_records_one_head "
            "ON observation_records (lineage) WHERE superseded_by IS NULL"
        ),
        "CREATE INDEX observation_records_by_lineage ON observation_records (lineage, generation)",
        """CREATE TABLE working_memory (
            key TEXT PRIMARY KEY,
            text TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m002_leases_and_boundaries(conn: sqlite3.Connection) -> None:
    statements = [
        # Buffering triggers: where the last observation / reflection buffer started. Existing
        # rows read back as 0, which is "no buffer triggered yet".
        "ALTER TABLE observation_records ADD COLUMN buffer_boundary_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE observation_records ADD COLUMN reflection_boundary_tokens INTEGER NOT NULL DEFAULT 0",
        # One row per held (or expired, not yet retaken) lease. Expiry is compared in Python
        # against the caller's clock, inside BEGIN IMMEDIATE, so no time column needs an index.
        """CREATE TABLE leases (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token INTEGER NOT NULL,
            acquired_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        )""",
        # The fencing-token counter, store-wide and separate from the leases so that releasing
        # (deleting) a lease never lets a later token repeat or go backward.
        """CREATE TABLE lease_tokens (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_token INTEGER NOT NULL
        )""",
        "INSERT INTO lease_tokens (id, last_token) VALUES (1, 0)",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m003_work_queue(conn: sqlite3.Connection) -> None:
    statements = [
        # Work for worker processes. The *_us columns are the instants as integers, so due and
        # expired items are found in SQL whatever offsets the ISO columns were written with.
        """CREATE TABLE work_items (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            enqueued_at TEXT NOT NULL,
            available_at TEXT NOT NULL,
            available_us INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            claimed_by TEXT,
            claim_token INTEGER,
            claim_expires_at TEXT,
            claim_expires_us INTEGER,
            last_error TEXT
        )""",
        # At most one waiting item per (kind, target): enqueueing again coalesces into it.
        "CREATE UNIQUE INDEX work_items_one_waiting ON work_items (kind, target) WHERE claimed_by IS NULL",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m004_dead_work(conn: sqlite3.Connection) -> None:
    # Work items that kept failing, moved out of the queue with their last error (bury_work);
    # kept until retried (retry_dead_work) or their thread is forgotten (delete_work).
    conn.execute(
        """CREATE TABLE dead_work (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            enqueued_at TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            last_error TEXT,
            failed_at TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX dead_work_by_target ON dead_work (target)")


@SQLITE_MIGRATIONS.register
def m005_model_calls(conn: sqlite3.Connection) -> None:
    # The cost ledger: one row per memory model call, no text. ``day`` is the UTC day the call
    # started (the report groups by it); ``started_us`` filters by time whatever the offset.
    statements = [
        """CREATE TABLE model_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at TEXT NOT NULL,
            started_us INTEGER NOT NULL,
            day TEXT NOT NULL,
            role TEXT NOT NULL,
            model TEXT NOT NULL,
            kind TEXT NOT NULL,
            operation TEXT,
            thread_id TEXT,
            resource_id TEXT,
            input_tokens INTEGER NOT NULL,
            cached_input_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            latency_s REAL NOT NULL,
            outcome TEXT NOT NULL,
            error_type TEXT,
            finish_reason TEXT
        )""",
        "CREATE INDEX model_calls_by_resource ON model_calls (resource_id, started_us)",
        "CREATE INDEX model_calls_by_thread ON model_calls (thread_id, started_us)",
        "CREATE INDEX model_calls_by_time ON model_calls (started_us)",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m006_message_rev(conn: sqlite3.Connection) -> None:
    # A thread's message revision: one more for every message row of the thread inserted,
    # updated or deleted, by whatever path (triggers, so no write can forget it). With the
    # head's id and version it marks a thread's window: a reader that kept a window and finds
    # the same mark knows nothing in it changed (obsmem.om.windows).
    statements = [
        "ALTER TABLE threads ADD COLUMN message_rev INTEGER NOT NULL DEFAULT 0",
        """CREATE TRIGGER messages_rev_insert AFTER INSERT ON messages BEGIN
            UPDATE threads SET message_rev = message_rev + 1 WHERE id = NEW.thread_id;
        END""",
        """CREATE TRIGGER messages_rev_update AFTER UPDATE ON messages BEGIN
            UPDATE threads SET message_rev = message_rev + 1 WHERE id IN (NEW.thread_id, OLD.thread_id);
        END""",
        """CREATE TRIGGER messages_rev_delete AFTER DELETE ON messages BEGIN
            UPDATE threads SET message_rev = message_rev + 1 WHERE id = OLD.thread_id;
        END""",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m007_threads_by_creation(conn: sqlite3.Connection) -> None:
    # The order every thread is listed in (list_all_threads): a page is read from this index at
    # its cursor instead of scanning and sorting the whole table for every page. IF NOT EXISTS,
    # as in PostgreSQL's step: an index built ahead by hand is kept.
    conn.execute("CREATE INDEX IF NOT EXISTS threads_by_creation ON threads (created_us, pk)")


@SQLITE_MIGRATIONS.register
def m008_thread_activity(conn: sqlite3.Connection) -> None:
    # A thread's activity: a store-wide counter (thread_activity.last) drawn when the thread is
    # inserted and again whenever a message is inserted into it, by triggers (so no write path
    # can forget it), in the write's transaction. Unique per thread, so the newest-first listing
    # (list_threads(newest_first=True)) pages by it alone from threads_by_activity. Existing
    # threads are numbered by their newest message's seq (threads without one first, by creation):
    # the order their activity would have given them.
    statements = [
        "ALTER TABLE threads ADD COLUMN activity INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE thread_activity (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last INTEGER NOT NULL
        )""",
        """CREATE TEMP TABLE thread_activity_backfill AS
            SELECT t.pk AS pk, ROW_NUMBER() OVER (ORDER BY COALESCE(m.newest, 0), t.pk) AS n
            FROM threads AS t LEFT JOIN (
                SELECT thread_id, MAX(seq) AS newest FROM messages GROUP BY thread_id
            ) AS m ON m.thread_id = t.id""",
        "CREATE UNIQUE INDEX temp.thread_activity_backfill_pk ON thread_activity_backfill (pk)",
        "UPDATE threads SET activity = (SELECT n FROM temp.thread_activity_backfill AS b WHERE b.pk = threads.pk)",
        "INSERT INTO thread_activity (id, last) VALUES (1, (SELECT COUNT(*) FROM threads))",
        "DROP TABLE temp.thread_activity_backfill",
        """CREATE TRIGGER threads_activity_insert AFTER INSERT ON threads BEGIN
            UPDATE thread_activity SET last = last + 1 WHERE id = 1;
            UPDATE threads SET activity = (SELECT last FROM thread_activity WHERE id = 1) WHERE pk = NEW.pk;
        END""",
        """CREATE TRIGGER messages_activity_insert AFTER INSERT ON messages BEGIN
            UPDATE thread_activity SET last = last + 1 WHERE id = 1;
            UPDATE threads SET activity = (SELECT last FROM thread_activity WHERE id = 1) WHERE id = NEW.thread_id;
        END""",
        "CREATE INDEX threads_by_activity ON threads (resource_id, activity)",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m009_forgotten_ids(conn: sqlite3.Connection) -> None:
    # Every message id a forget rewrote or deleted, per thread (ids only; gone with the thread).
    # The thread's row keeps the newest 1,000 (read at every boundary); a save finding that list
    # full checks its batch's ids here (obsmem.storage.contract.note_forgotten_ids).
    conn.execute(
        """CREATE TABLE forgotten_ids (
            thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            message_id TEXT NOT NULL,
            PRIMARY KEY (thread_id, message_id)
        ) WITHOUT ROWID"""
    )
