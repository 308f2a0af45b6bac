"""PostgreSQL schema migrations: the same numbered, recorded steps as SQLite's, for PostgreSQL.

The framework and the PostgreSQL dialect are :mod:`obsmem.migrations`; how a step runs safely
on a server that many processes (and machines) may open at once:

* Each step runs in one transaction together with the insert of its row in the version table
  (PostgreSQL DDL is transactional), so a crash leaves the database before or after the step,
  never half-way.
* The transaction first takes ``pg_advisory_xact_lock`` on :data:`ADVISORY_LOCK_KEY`: concurrent
  migrators queue on it, and the one that gets it second re-reads the table, sees the step done
  and skips it. Without the lock two processes could both run ``CREATE TABLE`` and one would
  fail. Every obsmem schema in a database (the message store's, the knowledge store's, the
  vector indexes') takes this one lock, so all schema changes in a database queue behind each other.

Migrations run on a plain (synchronous) psycopg connection in autocommit mode, which is what
``obsmem migrate`` has too; the async store runs them on a thread when it first opens.

Layout: every row keeps its model as a JSON document in a ``doc`` TEXT column (JSON text, not
``jsonb``, so a document round-trips exactly, datetimes keep their UTC offsets and a NUL
character in a message survives as ``\\u0000``), next to the columns the store queries, locks and
orders by. Store-managed fields (``seq``, ``version``, ``superseded_by``) live in columns only
where they change without the document being rewritten, and columns win when a row is read.
"""

from __future__ import annotations

from typing import Any

import psycopg

from obsmem.migrations import ADVISORY_LOCK_KEY, POSTGRESQL, MigrationSet, PostgresDialect

__all__ = ["ADVISORY_LOCK_KEY", "POSTGRESQL", "POSTGRES_MIGRATIONS", "PostgresDialect", "migrate", "pending"]

Conn = psycopg.Connection[Any]

POSTGRES_MIGRATIONS: MigrationSet[Conn] = MigrationSet(POSTGRESQL)


def pending(conn: Conn) -> list[str]:
    """Names of the PostgreSQL migrations not yet applied (read-only)."""
    return [m.name for m in POSTGRES_MIGRATIONS.pending(conn)]


def migrate(conn: Conn) -> list[str]:
    """Bring a PostgreSQL database up to date; returns the names applied now."""
    return POSTGRES_MIGRATIONS.migrate(conn)


def _run(conn: Conn, statements: list[str]) -> None:
    for statement in statements:
        conn.execute(statement)


@POSTGRES_MIGRATIONS.register
def m001_initial(conn: Conn) -> None:
    _run(conn, [
        """CREATE TABLE threads (
            pk BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            resource_id TEXT NOT NULL,
            created_us BIGINT NOT NULL,
            version BIGINT NOT NULL,
            doc TEXT NOT NULL
        )""",
        "CREATE INDEX threads_by_resource ON threads (resource_id, created_us, pk)",
        # seq comes from this sequence, drawn while the thread's row is locked: unique and
        # increasing store-wide, and commit-ordered within a thread (see the store's docstring).
        "CREATE SEQUENCE messages_seq",
        """CREATE TABLE messages (
            seq BIGINT PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            doc TEXT NOT NULL
        )""",
        "CREATE INDEX messages_by_thread ON messages (thread_id, seq)",
        """CREATE TABLE observation_records (
            pk BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            lineage TEXT NOT NULL,
            scope TEXT NOT NULL CHECK (scope IN ('thread', 'resource')),
            thread_id TEXT,
            -- thread_id for thread-scoped records only: deleting the thread deletes its lineage,
            -- and a record cannot be created for a thread that does not exist (the write guard).
            thread_ref TEXT REFERENCES threads (id) ON DELETE CASCADE,
            resource_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            version BIGINT NOT NULL,
            superseded_by TEXT,
            doc TEXT NOT NULL
        )""",
        # One live head per lineage, as a constraint: a second head fails instead of forking.
        ("CREATE UNIQUE INDEX observation_records_one_head ON observation_records (lineage) "
        "WHERE superseded_by IS NULL"),
        "CREATE INDEX observation_records_by_lineage ON observation_records (lineage, generation)",
        "CREATE INDEX observation_records_by_thread ON observation_records (thread_ref)",
        """CREATE TABLE working_memory (
            key TEXT PRIMARY KEY,
            text TEXT NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL
        )""",
        # Expiry is decided in Python against the caller's clock, under an advisory lock on the
        # key, so the times are kept as ISO text with their offsets.
        """CREATE TABLE leases (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token BIGINT NOT NULL,
            acquired_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        )""",
        # The fencing-token counter: one row, so tokens rise in commit order across all keys.
        "CREATE TABLE lease_tokens (id INTEGER PRIMARY KEY CHECK (id = 1), last_token BIGINT NOT NULL)",
        "INSERT INTO lease_tokens (id, last_token) VALUES (1, 0)",
        # The work queue. *_us are instants in microseconds for the claim query.
        """CREATE TABLE work_items (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            enqueued_at TEXT NOT NULL,
            available_at TEXT NOT NULL,
            available_us BIGINT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            claimed_by TEXT,
            claim_token BIGINT,
            claim_expires_at TEXT,
            claim_expires_us BIGINT,
            last_error TEXT
        )""",
        "CREATE UNIQUE INDEX work_items_one_waiting ON work_items (kind, target) WHERE claimed_by IS NULL",
        "CREATE INDEX work_items_due ON work_items (available_us, id) WHERE claimed_by IS NULL",
        "CREATE INDEX work_items_claims ON work_items (claim_expires_us) WHERE claimed_by IS NOT NULL",
        # Claim tokens: drawn while the item's row is locked, so each claim of an item is higher.
        "CREATE SEQUENCE work_claim_tokens",
    ])


@POSTGRES_MIGRATIONS.register
def m002_vectors(conn: Conn) -> None:
    """The ``vectors`` table: pgvector when the server has it, exact ``float8[]`` search otherwise.

    Retired: no obsmem code reads or writes this table any more. Vector search in PostgreSQL is
    :class:`obsmem.vectors.PostgresVectorIndex`, whose tables are its own. The step stays
    registered because existing databases record it (a database recording a step this version
    does not know is refused), and it still creates the ``vector`` extension where it can.

    ``SET obsmem.vectors = 'exact'`` (per database: ``ALTER DATABASE … SET obsmem.vectors =
    'exact'``) chose the exact layout even where pgvector is installed.
    """
    row = conn.execute("SELECT current_setting('obsmem.vectors', true)").fetchone()
    wanted = (row[0] if row else None) or "auto"
    use_pgvector = False
    if wanted != "exact":
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        if available is not None:
            try:
                with conn.transaction():  # a savepoint: lacking the privilege must not abort the step
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                use_pgvector = True
            except psycopg.Error:
                use_pgvector = False
    column = "vector" if use_pgvector else "float8[]"
    _run(conn, [
        f"""CREATE TABLE vectors (
            namespace TEXT NOT NULL,
            id TEXT NOT NULL,
            dims INTEGER NOT NULL,
            norm DOUBLE PRECISION NOT NULL,
            embedding {column} NOT NULL,
            metadata TEXT NOT NULL,
            PRIMARY KEY (namespace, id)
        )""",
        "CREATE INDEX vectors_by_namespace ON vectors (namespace, dims)",
    ])


@POSTGRES_MIGRATIONS.register
def m003_dead_work(conn: Conn) -> None:
    """Work items that kept failing, moved out of the queue with their last error
    (``bury_work``); kept until retried (``retry_dead_work``) or their thread is forgotten."""
    _run(conn, [
        """CREATE TABLE dead_work (
            id BIGINT PRIMARY KEY,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            enqueued_at TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            last_error TEXT,
            failed_at TEXT NOT NULL
        )""",
        "CREATE INDEX dead_work_by_target ON dead_work (target)",
    ])


@POSTGRES_MIGRATIONS.register
def m004_model_calls(conn: Conn) -> None:
    """The cost ledger: one row per memory model call, no text. ``day`` is the UTC day the call
    started (the report groups by it); ``started_us`` filters by time."""
    _run(conn, [
        """CREATE TABLE model_calls (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            started_at TEXT NOT NULL,
            started_us BIGINT NOT NULL,
            day TEXT NOT NULL,
            role TEXT NOT NULL,
            model TEXT NOT NULL,
            kind TEXT NOT NULL,
            operation TEXT,
            thread_id TEXT,
            resource_id TEXT,
            input_tokens BIGINT NOT NULL,
            cached_input_tokens BIGINT NOT NULL,
            cache_write_tokens BIGINT NOT NULL,
            output_tokens BIGINT NOT NULL,
            latency_s DOUBLE PRECISION NOT NULL,
            outcome TEXT NOT NULL,
            error_type TEXT,
            finish_reason TEXT
        )""",
        "CREATE INDEX model_calls_by_resource ON model_calls (resource_id, started_us)",
        "CREATE INDEX model_calls_by_thread ON model_calls (thread_id, started_us)",
        "CREATE INDEX model_calls_by_time ON model_calls (started_us)",
    ])


@POSTGRES_MIGRATIONS.register
def m005_threads_by_creation(conn: Conn) -> None:
    """The order every thread is listed in (``list_all_threads``): a page is read from this index
    at its cursor instead of scanning and sorting the whole table for every page.

    A plain build in the step's transaction: writes to ``threads`` wait while it runs. Where that
    matters (a large, busy table), build it beforehand with ``CREATE INDEX CONCURRENTLY
    threads_by_creation ON threads (created_us, pk)``; the step then finds it and only records itself.
    """
    _run(conn, ["CREATE INDEX IF NOT EXISTS threads_by_creation ON threads (created_us, pk)"])


@POSTGRES_MIGRATIONS.register
def m006_thread_activity(conn: Conn) -> None:
    """A thread's activity, what the newest-first listing (``list_threads(newest_first=True)``)
    orders by: drawn from ``thread_activity_seq`` when the thread is inserted (the column's
    default) and again, in the insert's statement, whenever messages are inserted into it.
    Unique per thread, so that listing pages by it alone from threads_by_activity. Existing
    threads are numbered by their newest message's seq (threads without one first, by creation).

    The backfill rewrites every thread row and the index is built plainly, in the step's
    transaction: writes to ``threads`` wait while it runs."""
    _run(conn, [
        "CREATE SEQUENCE IF NOT EXISTS thread_activity_seq",
        "ALTER TABLE threads ADD COLUMN activity BIGINT NOT NULL DEFAULT 0",
        """UPDATE threads AS t SET activity = r.n FROM (
            SELECT t2.pk, ROW_NUMBER() OVER (ORDER BY COALESCE(m.newest, 0), t2.pk) AS n
            FROM threads AS t2 LEFT JOIN (
                SELECT thread_id, MAX(seq) AS newest FROM messages GROUP BY thread_id
            ) AS m ON m.thread_id = t2.id
        ) AS r WHERE t.pk = r.pk""",
        "SELECT setval('thread_activity_seq', (SELECT COUNT(*) FROM threads) + 1, false)",
        "ALTER TABLE threads ALTER COLUMN activity SET DEFAULT nextval('thread_activity_seq')",
        "CREATE INDEX threads_by_activity ON threads (resource_id, activity)",
    ])


@POSTGRES_MIGRATIONS.register
def m007_forgotten_ids(conn: Conn) -> None:
    """Every message id a forget rewrote or deleted, per thread (ids only; gone with the thread by
    ON DELETE CASCADE). The thread's row keeps the newest 1,000 (read at every boundary); a save
    finding that list full checks its batch's ids here
    (:func:`obsmem.storage.contract.note_forgotten_ids`)."""
    _run(conn, [
        """CREATE TABLE forgotten_ids (
            thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            message_id TEXT NOT NULL,
            PRIMARY KEY (thread_id, message_id)
        )""",
    ])
