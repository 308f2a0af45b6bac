"""The knowledge store's PostgreSQL schema: numbered migrations in ``_obsmem_knowledge_migrations``.

The knowledge tables evolve separately from the message store's (their own version table, as in
SQLite), so a knowledge store can share a database with a message store or have one to itself.
Each step runs, together with the insert of its row, in one transaction that first takes
``pg_advisory_xact_lock`` on the same key the message store's migrations use: every obsmem schema
change in a database queues behind that one lock, and a migrator that gets it second re-reads the
table, sees the step done and skips it.

Layout mirrors :mod:`~obsmem.knowledge.store.sqlite`: each row keeps the full model as JSON
text in ``doc`` (text, not ``jsonb``, so a document round-trips exactly) plus the columns it is
looked up by. ``name_key`` is ``bytea`` because a name may hold a NUL character, which a
PostgreSQL ``text`` value cannot; inside ``doc`` JSON escapes it.
"""

from __future__ import annotations

from typing import Any

import psycopg

from obsmem.knowledge.store.tables import KNOWLEDGE_MIGRATIONS_TABLE
from obsmem.storage.migrations import MigrationSet
from obsmem.storage.postgres.migrations import POSTGRESQL

__all__ = ["KNOWLEDGE_MIGRATIONS", "KNOWLEDGE_MIGRATIONS_TABLE"]

Conn = psycopg.Connection[Any]

KNOWLEDGE_MIGRATIONS: MigrationSet[Conn] = MigrationSet(
    POSTGRESQL, KNOWLEDGE_MIGRATIONS_TABLE, "postgresql-knowledge"
)


@KNOWLEDGE_MIGRATIONS.register
def m001_knowledge_initial(conn: Conn) -> None:
    statements = [
        """CREATE TABLE knowledge_nodes (
            id TEXT PRIMARY KEY, scope TEXT NOT NULL, name_key BYTEA NOT NULL, doc TEXT NOT NULL)""",
        # Identity is (scope, case-insensitive name): a second node of that name cannot exist.
        "CREATE UNIQUE INDEX knowledge_nodes_identity ON knowledge_nodes (scope, name_key)",
        """CREATE TABLE knowledge_node_mentions (
            node_id TEXT NOT NULL, target_id TEXT NOT NULL, PRIMARY KEY (node_id, target_id))""",
        "CREATE INDEX knowledge_node_mentions_by_target ON knowledge_node_mentions (target_id)",
        """CREATE TABLE knowledge_records (
            id TEXT PRIMARY KEY, node_id TEXT NOT NULL, scope TEXT NOT NULL, doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_records_by_node ON knowledge_records (node_id)",
        "CREATE INDEX knowledge_records_by_scope ON knowledge_records (scope)",
        """CREATE TABLE knowledge_record_mentions (
            record_id TEXT NOT NULL, target_id TEXT NOT NULL, PRIMARY KEY (record_id, target_id))""",
        "CREATE INDEX knowledge_record_mentions_by_target ON knowledge_record_mentions (target_id)",
        "CREATE TABLE knowledge_events (id TEXT PRIMARY KEY, scope TEXT NOT NULL, doc TEXT NOT NULL)",
        "CREATE INDEX knowledge_events_by_scope ON knowledge_events (scope, id)",
        """CREATE TABLE knowledge_tombstones (
            id TEXT PRIMARY KEY, node_id TEXT NOT NULL, scope TEXT NOT NULL, doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_tombstones_by_node ON knowledge_tombstones (node_id)",
        "CREATE INDEX knowledge_tombstones_by_scope ON knowledge_tombstones (scope)",
        """CREATE TABLE knowledge_outbox (
            id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
            doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_outbox_open ON knowledge_outbox (id) WHERE status <> 'completed'",
        # The embedding as little-endian float32 bytes: exactly what was stored comes back.
        """CREATE TABLE knowledge_vectors (
            document_id TEXT PRIMARY KEY, record_id TEXT NOT NULL, scope TEXT NOT NULL,
            embedder TEXT NOT NULL, dimensions INTEGER NOT NULL, vector BYTEA NOT NULL)""",
        "CREATE INDEX knowledge_vectors_by_scope ON knowledge_vectors (scope)",
    ]
    for statement in statements:
        conn.execute(statement)
