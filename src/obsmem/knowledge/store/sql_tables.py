"""The row-level queries of both SQL knowledge adapters, written once over a small dialect.

:mod:`~obsmem.knowledge.store.sqlite` and :mod:`~obsmem.knowledge.store.postgres` keep the same
tables and ask them the same questions; :class:`SqlKnowledgeTables` is that one
:class:`~obsmem.knowledge.store.tables.KnowledgeTables`, over a connection inside a transaction
the adapter has opened. What the two SQL dialects spell differently is a :class:`SqlDialect`
(:data:`SQLITE_DIALECT`, :data:`POSTGRES_DIALECT`): the placeholder (queries here are written
with ``?``), "column in a list", the upsert, replacing a row's mention rows, how ``name_key`` is
stored (PostgreSQL keeps bytes, see its module), a prefix match, reading a field of the JSON
``doc``, and the byte order of stored vectors. Connections, transactions and migrations stay in
each adapter's module.

Each row keeps the full model as JSON in ``doc`` plus the few columns it is looked up by, so the
rules in :mod:`~obsmem.knowledge.store.ops` see exactly what the in-memory adapter sees.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from obsmem.errors import StorageError
from obsmem.knowledge.store import contract as c
from obsmem.knowledge.store.tables import (
    FORGOTTEN_NODE_ID,
    RecordLabel,
    VectorLabel,
    name_key,
    node_order,
    node_search_text,
    record_search_text,
)

__all__ = [
    "NODE_PAGE_INDEXES",
    "OPEN_OUTBOX",
    "POSTGRES_DIALECT",
    "SQLITE_DIALECT",
    "SqlConnection",
    "SqlDialect",
    "SqlKnowledgeTables",
    "fill_search_index",
]

M = TypeVar("M", bound=BaseModel)


class SqlCursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...


class SqlConnection(Protocol):
    """What the tables need of a connection: ``sqlite3.Connection`` and psycopg's both fit."""

    def execute(self, sql: str, params: Sequence[Any], /) -> SqlCursor: ...


class SqlDialect:
    """How one SQL dialect spells what the knowledge queries need; the SQLite spelling is the default."""

    placeholder = "?"
    vector_dtype: np.dtype[np.float32] = np.dtype(np.float32)
    """The stored vector's bytes: SQLite keeps the machine's float32, PostgreSQL little-endian."""
    text_holds_nul = True
    """Whether a text column may hold a NUL character (PostgreSQL's may not)."""

    def sql(self, text: str) -> str:
        """``text``, written with ``?`` placeholders (and no other ``?``), in this dialect."""
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def in_list(self, column: str, values: Sequence[str]) -> tuple[str, list[object]]:
        """A condition that ``column`` is one of ``values`` (none: false), and its parameters."""
        return f"{column} IN ({', '.join('?' for _ in values) or 'NULL'})", list(values)

    def upsert(self, table: str, columns: Sequence[str], key: str) -> str:
        """Insert a row of ``columns``, replacing the row with the same ``key``."""
        marks = ", ".join("?" for _ in columns)
        return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})"

    def replace_mentions(
        self, conn: SqlConnection, table: str, owner_column: str, owner_id: str, targets: Sequence[str]
    ) -> None:
        """Make ``targets`` the mention rows of ``owner_id`` (one insert a target: a repeated target
        violates the primary key)."""
        conn.execute(self.sql(f"DELETE FROM {table} WHERE {owner_column} = ?"), (owner_id,))
        insert = self.sql(f"INSERT INTO {table} ({owner_column}, target_id) VALUES (?, ?)")
        for target in targets:
            conn.execute(insert, (owner_id, target))

    def name_key(self, key: str) -> object:
        """The stored form of a :func:`~obsmem.knowledge.store.tables.name_key`."""
        return key

    def prefix(self, column: str) -> str:
        """The first ``?`` characters of ``column``."""
        return f"substr({column}, 1, ?)"

    def json_field(self, column: str, field: str) -> str:
        """The text of top-level ``field`` of the JSON document in ``column``."""
        return f"json_extract({column}, '$.{field}')"

    # -- the lexical search index ----------------------------------------------------------------
    # SQLite: ``knowledge_search``, an FTS5 table with the trigram tokenizer (case-sensitive: it
    # holds the text already casefolded by Python, so a match is Python's ``term in text``), its
    # rowid the ``n`` of the row's line in ``knowledge_search_rows`` (kind, id, scope). A probe
    # of three characters or more is an FTS5 phrase (its trigrams, consecutive); a shorter one is
    # found through ``knowledge_search_vocab`` (fts5vocab, instance), as the first characters of
    # a trigram: the stored text ends with two ``_PAD`` characters, so each occurrence of a one-
    # or two-character probe begins a trigram. Both read the index's entries for those trigrams,
    # not the rows.

    def search_put(self, conn: SqlConnection, kind: str, row_id: str, scope: str, text: str) -> None:
        """Index ``text`` (a row's search text) for the row ``(kind, row_id)`` stored at ``scope``."""
        stored = _storable(text) + _PAD
        row = conn.execute("SELECT n FROM knowledge_search_rows WHERE kind = ? AND id = ?", (kind, row_id)).fetchone()
        if row is not None:
            n = row[0]
            conn.execute("UPDATE knowledge_search_rows SET scope = ? WHERE n = ?", (scope, n))
            old = conn.execute("SELECT hay FROM knowledge_search WHERE rowid = ?", (n,)).fetchone()
            if old is not None and old[0] == stored:
                return  # the text is unchanged (a trust change, a rescope): the index stays
            conn.execute("DELETE FROM knowledge_search WHERE rowid = ?", (n,))
        else:
            inserted = conn.execute(
                "INSERT INTO knowledge_search_rows (kind, id, scope) VALUES (?, ?, ?) RETURNING n",
                (kind, row_id, scope),
            ).fetchone()
            n = inserted[0]
        conn.execute("INSERT INTO knowledge_search (rowid, hay) VALUES (?, ?)", (n, stored))

    def search_drop(self, conn: SqlConnection, kind: str, row_id: str) -> None:
        """Remove the row's text from the index."""
        row = conn.execute("SELECT n FROM knowledge_search_rows WHERE kind = ? AND id = ?", (kind, row_id)).fetchone()
        if row is not None:
            conn.execute("DELETE FROM knowledge_search WHERE rowid = ?", (row[0],))
            conn.execute("DELETE FROM knowledge_search_rows WHERE n = ?", (row[0],))

    def search_find(
        self, conn: SqlConnection, scope_keys: Sequence[str], probes: Sequence[str]
    ) -> list[tuple[str, str]]:
        """(kind, id) of the rows stored at ``scope_keys`` whose text may hold one of ``probes``.

        The index holds every scope's rows (every user, every org of the file): what it finds
        for a common term is found across all of them. So the texts of the caller's own rows are
        read instead (``instr``, in SQLite, no row decoded) for a probe of one or two characters
        (its index entries are those of every trigram it begins, the file over) and, when the
        scope chain holds few rows for the probes, for all of them: a search's work is bounded by
        the caller's rows or by the rows that match, never by other scopes' rows."""
        at, params = self.in_list("r.scope", scope_keys)
        short = [p for p in probes if len(p) < 3]
        long = [p for p in probes if len(p) >= 3]
        rows: set[tuple[str, str]] = set()
        in_scope = conn.execute(f"SELECT count(*) FROM knowledge_search_rows r WHERE {at}", params).fetchone()[0]
        if in_scope * len(long) <= _SCAN_WORK:
            short, long = list(probes), []
        for start in range(0, len(short) if in_scope else 0, _PROBES_A_QUERY):
            chunk = short[start : start + _PROBES_A_QUERY]
            holds = " OR ".join("instr(s.hay, ?) > 0" for _ in chunk)
            sql = (f"SELECT r.kind, r.id FROM knowledge_search_rows r JOIN knowledge_search s ON s.rowid = r.n "
                   f"WHERE {at} AND ({holds})")  # fmt: skip
            rows.update((row[0], row[1]) for row in conn.execute(sql, (*params, *chunk)))
        found: set[int] = set()
        for start in range(0, len(long), _PROBES_A_QUERY):
            expression = " OR ".join('"' + p.replace('"', '""') + '"' for p in long[start : start + _PROBES_A_QUERY])
            found.update(row[0] for row in conn.execute(
                "SELECT rowid FROM knowledge_search WHERE knowledge_search MATCH ?", (expression,)
            ))
        ns = sorted(found)
        for start in range(0, len(ns), _IDS_A_QUERY):
            some = ns[start : start + _IDS_A_QUERY]
            sql = f"SELECT r.kind, r.id FROM knowledge_search_rows r WHERE r.n IN ({', '.join('?' for _ in some)}) AND {at}"
            rows.update((row[0], row[1]) for row in conn.execute(sql, (*some, *params)))
        return sorted(rows)


class PostgresDialect(SqlDialect):
    """PostgreSQL's spelling (psycopg's ``%s`` placeholders, arrays for lists, ``bytea`` name keys)."""

    placeholder = "%s"
    vector_dtype = np.dtype("<f4")
    text_holds_nul = False

    def in_list(self, column: str, values: Sequence[str]) -> tuple[str, list[object]]:
        return f"{column} = ANY(?)", [list(values)]

    def upsert(self, table: str, columns: Sequence[str], key: str) -> str:
        marks = ", ".join("?" for _ in columns)
        updates = ", ".join(f"{col} = EXCLUDED.{col}" for col in columns if col != key)
        return (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
            f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
        )

    def replace_mentions(
        self, conn: SqlConnection, table: str, owner_column: str, owner_id: str, targets: Sequence[str]
    ) -> None:
        conn.execute(self.sql(f"DELETE FROM {table} WHERE {owner_column} = ?"), (owner_id,))
        if targets:
            conn.execute(
                self.sql(
                    f"INSERT INTO {table} ({owner_column}, target_id) SELECT ?, unnest(?::text[]) "
                    "ON CONFLICT DO NOTHING"
                ),
                (owner_id, list(targets)),
            )

    def name_key(self, key: str) -> object:
        return key.encode("utf-8")  # bytea: a name may hold a NUL character

    def prefix(self, column: str) -> str:
        return f"left({column}, ?)"

    def search_put(self, conn: SqlConnection, kind: str, row_id: str, scope: str, text: str) -> None:
        conn.execute(
            "INSERT INTO knowledge_search (kind, id, scope, hay) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (kind, id) DO UPDATE SET scope = EXCLUDED.scope, hay = EXCLUDED.hay "
            "WHERE knowledge_search.scope <> EXCLUDED.scope OR knowledge_search.hay <> EXCLUDED.hay",
            (kind, row_id, scope, _storable(text)),
        )

    def search_drop(self, conn: SqlConnection, kind: str, row_id: str) -> None:
        conn.execute("DELETE FROM knowledge_search WHERE kind = %s AND id = %s", (kind, row_id))

    def search_find(
        self, conn: SqlConnection, scope_keys: Sequence[str], probes: Sequence[str]
    ) -> list[tuple[str, str]]:
        # ``hay LIKE '%probe%'`` through the pg_trgm GIN index on ``hay`` (where the extension
        # could be installed): a probe of three characters or more reads the index's entries for
        # its trigrams; a shorter one has none, and the index is walked whole (in the server,
        # never decoding a row that does not hold it).
        rows: set[tuple[str, str]] = set()
        for start in range(0, len(probes), _PROBES_A_QUERY):
            chunk = probes[start : start + _PROBES_A_QUERY]
            likes = " OR ".join("hay LIKE %s" for _ in chunk)
            patterns = ["%" + p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for p in chunk]
            sql = f"SELECT kind, id FROM knowledge_search WHERE scope = ANY(%s) AND ({likes})"
            rows.update((row[0], row[1]) for row in conn.execute(sql, (list(scope_keys), *patterns)))
        return sorted(rows)

    def json_field(self, column: str, field: str) -> str:
        # jsonb refuses a document holding the escape of a NUL character (text a user pasted):
        # one such row made every read filtering its rows fail. The escape becomes U+FFFD's
        # (same shape, so the JSON stays valid whatever backslashes precede it) for the cast
        # only; the stored document, and what reads return, keep the NUL.
        return f"(replace({column}, '\\u0000', '\\ufffd')::jsonb ->> '{field}')"


_PAD = "\uffff\uffff"
"""Two characters after each stored SQLite search text, so every occurrence of a one- or
two-character probe is the start of a trigram (see :meth:`SqlDialect.search_put`)."""
_PROBES_A_QUERY = 100
_SCAN_WORK = 20_000
"""The most (rows of the scope chain) x (probes) a SQLite search reads the texts of rather than
asking the index (see :meth:`SqlDialect.search_find`)."""
_IDS_A_QUERY = 500
_ATTRIBUTES_A_QUERY = 500


def _storable(text: str) -> str:
    """A search text as an index keeps it: NUL (which no PostgreSQL text holds, nor an FTS5 query)
    as U+FFFD. A probe holds no NUL (:func:`~obsmem.knowledge.store.tables.search_probe`), so it
    is found in this wherever it is in the text; a probe holding U+FFFD may find more, which the
    search's own check drops."""
    return text.replace("\x00", "\ufffd")


SQLITE_DIALECT = SqlDialect()
POSTGRES_DIALECT = PostgresDialect()

# The columns of each table rows are upserted into; the first is the key.
_ROW_COLUMNS = {
    "knowledge_nodes": ("id", "scope", "name_key", "doc"),
    "knowledge_records": ("id", "node_id", "scope", "doc"),
    "knowledge_tombstones": ("id", "node_id", "scope", "doc"),
    "knowledge_outbox": ("id", "idempotency_key", "status", "doc"),
    "knowledge_vectors": ("document_id", "record_id", "scope", "embedder", "dimensions", "vector"),
}
NODE_PAGE_INDEXES = (
    # (node_id, id) and (target_id, record_id) take the place of the single-column indexes
    "DROP INDEX IF EXISTS knowledge_records_by_node",
    "CREATE INDEX knowledge_records_by_node ON knowledge_records (node_id, id)",
    "DROP INDEX IF EXISTS knowledge_record_mentions_by_target",
    "CREATE INDEX knowledge_record_mentions_by_target ON knowledge_record_mentions (target_id, record_id)",
)
"""The indexes a page of a node's records walks (a migration of each SQL adapter)."""

OPEN_OUTBOX = "SELECT doc FROM knowledge_outbox WHERE status <> 'completed' AND id > ? ORDER BY id"
"""Open outbox entries after an id (``LIMIT ?`` appended for a page), in the order and under the
condition of the partial index ``knowledge_outbox_open``, so a page reads only what it returns."""

# Tombstone rows that are tombstones, and those that are forgotten values (FORGOTTEN_NODE_ID).
_REAL = f" AND node_id <> '{FORGOTTEN_NODE_ID}'"
_FORGOTTEN = f" AND node_id = '{FORGOTTEN_NODE_ID}'"


def _load(cls: type[M], doc: str) -> M:
    try:
        return cls.model_validate_json(doc)
    except ValidationError as exc:
        raise StorageError(f"A stored {cls.__name__} row could not be decoded: {exc}") from exc


def _holds_nul(params: Sequence[object]) -> bool:
    """Whether a text parameter (or one of a list parameter's texts) holds a NUL character."""
    return any(
        "\x00" in value if isinstance(value, str)
        else isinstance(value, list) and any(isinstance(v, str) and "\x00" in v for v in value)
        for value in params
    )


class SqlKnowledgeTables:
    """:class:`~obsmem.knowledge.store.tables.KnowledgeTables` over one connection inside an open
    transaction, in ``dialect``."""

    def __init__(self, conn: SqlConnection, dialect: SqlDialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def _execute(self, sql: str, params: Sequence[object] = ()) -> SqlCursor:
        return self.conn.execute(self.dialect.sql(sql), tuple(params))

    def _docs(self, cls: type[M], sql: str, params: Sequence[object] = ()) -> list[M]:
        if not self.dialect.text_holds_nul and _holds_nul(params):
            # No stored text equals a value holding NUL (an id, a thread id, an attribute from a
            # request), and PostgreSQL refuses it as a parameter: the read finds nothing, as on SQLite.
            return []
        return [_load(cls, row[0]) for row in self._execute(sql, params)]

    def _one(self, cls: type[M], sql: str, params: Sequence[object]) -> M | None:
        found = self._docs(cls, sql, params)
        return found[0] if found else None

    def _in(self, cls: type[M], sql: str, scope_keys: Sequence[str]) -> list[M]:
        """``sql`` with ``{scope}`` standing for "scope is one of ``scope_keys``"."""
        condition, params = self.dialect.in_list("scope", scope_keys)
        return self._docs(cls, sql.format(scope=condition), params)

    def _at(self, scope_keys: Sequence[str], below: str | None) -> tuple[str, list[object]]:
        """The condition that ``scope`` is one of ``scope_keys`` or strictly below ``below``."""
        condition, params = self.dialect.in_list("scope", scope_keys)
        if below is None:
            return condition, params
        prefix = below + "/"
        return f"({condition} OR {self.dialect.prefix('scope')} = ?)", [*params, len(prefix), prefix]

    def _upsert(self, table: str, values: Sequence[object]) -> None:
        columns = _ROW_COLUMNS[table]
        self._execute(self.dialect.upsert(table, columns, columns[0]), values)

    # nodes
    def node(self, node_id: str) -> c.Node | None:
        return self._one(c.Node, "SELECT doc FROM knowledge_nodes WHERE id = ?", (node_id,))

    def node_by_name(self, scope_key: str, key: str) -> c.Node | None:
        return self._one(
            c.Node,
            "SELECT doc FROM knowledge_nodes WHERE scope = ? AND name_key = ?",
            (scope_key, self.dialect.name_key(key)),
        )

    def save_node(self, node: c.Node) -> None:
        self._upsert(
            "knowledge_nodes",
            (node.id, node.scope, self.dialect.name_key(name_key(node.name)), node.model_dump_json()),
        )
        self.dialect.search_put(self.conn, "node", node.id, node.scope, node_search_text(node))
        self.dialect.replace_mentions(self.conn, "knowledge_node_mentions", "node_id", node.id, node.mentions)

    def nodes_in(self, scope_keys: Sequence[str]) -> list[c.Node]:
        return self._in(c.Node, "SELECT doc FROM knowledge_nodes WHERE {scope} ORDER BY id", scope_keys)

    def nodes_page(
        self, scope_keys: Sequence[str], *, after: tuple[str, str] | None, prefix: str | None, limit: int
    ) -> list[c.Node]:
        # A name key is unique within a scope: each scope key's run, in name-key order from the
        # cursor's (or the prefix) on, is one range of the (scope, name_key) index. One more
        # than the page per run, since the cursor's own node may head it. The runs are merged.
        low = max(after[0] if after is not None else "", prefix or "")
        runs = [
            self._docs(
                c.Node,
                "SELECT doc FROM knowledge_nodes WHERE scope = ? AND name_key >= ? ORDER BY name_key LIMIT ?",
                (key, self.dialect.name_key(low), limit + 1),
            )
            for key in dict.fromkeys(scope_keys)
        ]
        page: list[c.Node] = []
        for node in heapq.merge(*runs, key=node_order):
            if len(page) == limit:
                break
            order = node_order(node)
            if after is not None and order <= after:
                continue
            if prefix is not None and not order[0].startswith(prefix):
                break  # the keys that start with the prefix are one run of the order, and it is past
            page.append(node)
        return page

    def search_candidates(
        self, scope_keys: Sequence[str], probes: Sequence[str]
    ) -> tuple[list[c.Node], list[c.Record]]:
        found = self.dialect.search_find(self.conn, scope_keys, probes)
        ids = {"node": [i for kind, i in found if kind == "node"], "record": [i for kind, i in found if kind == "record"]}
        return (
            self._by_ids(c.Node, "knowledge_nodes", ids["node"]),
            self._by_ids(c.Record, "knowledge_records", ids["record"]),
        )

    def _by_ids(self, cls: type[M], table: str, ids: Sequence[str]) -> list[M]:
        """The rows of ``table`` with these ids, in id order."""
        found: list[M] = []
        for start in range(0, len(ids), _IDS_A_QUERY):
            condition, params = self.dialect.in_list("id", ids[start : start + _IDS_A_QUERY])
            found.extend(self._docs(cls, f"SELECT doc FROM {table} WHERE {condition}", params))
        return sorted(found, key=lambda row: str(getattr(row, "id")))

    def nodes_mentioning(self, node_id: str) -> list[c.Node]:
        return self._docs(
            c.Node,
            "SELECT n.doc FROM knowledge_nodes AS n JOIN knowledge_node_mentions AS m ON m.node_id = n.id "
            "WHERE m.target_id = ? ORDER BY n.id",
            (node_id,),
        )

    # records
    def record(self, record_id: str) -> c.Record | None:
        return self._one(c.Record, "SELECT doc FROM knowledge_records WHERE id = ?", (record_id,))

    def save_record(self, record: c.Record) -> None:
        stored = record.model_copy(update={"valid_until": None})
        self._upsert("knowledge_records", (stored.id, stored.node_id, stored.scope, stored.model_dump_json()))
        self.dialect.search_put(self.conn, "record", stored.id, stored.scope, record_search_text(stored))
        self.dialect.replace_mentions(
            self.conn, "knowledge_record_mentions", "record_id", stored.id, stored.mentions
        )

    def records_in(self, scope_keys: Sequence[str]) -> list[c.Record]:
        return self._in(c.Record, "SELECT doc FROM knowledge_records WHERE {scope} ORDER BY id", scope_keys)

    def records_about(self, node_id: str) -> list[c.Record]:
        return self._docs(
            c.Record, "SELECT doc FROM knowledge_records WHERE node_id = ? ORDER BY id", (node_id,)
        )

    def records_mentioning(self, node_id: str) -> list[c.Record]:
        return self._docs(
            c.Record,
            "SELECT r.doc FROM knowledge_records AS r "
            "JOIN knowledge_record_mentions AS m ON m.record_id = r.id "
            "WHERE m.target_id = ? ORDER BY r.id",
            (node_id,),
        )

    def records_about_page(self, node_id: str, before: str | None, limit: int) -> list[c.Record]:
        # Walks the index (node_id, id) backwards: reads the page, not the node.
        bound, params = ("", [node_id]) if before is None else (" AND id < ?", [node_id, before])
        sql = f"SELECT doc FROM knowledge_records WHERE node_id = ?{bound} ORDER BY node_id DESC, id DESC LIMIT ?"
        return self._docs(c.Record, sql, [*params, limit])

    def records_mentioning_page(self, node_id: str, before: str | None, limit: int) -> list[c.Record]:
        # Walks the mentions' index (target_id, record_id) backwards, one record lookup a row.
        bound, params = ("", [node_id]) if before is None else (" AND m.record_id < ?", [node_id, before])
        sql = (
            "SELECT r.doc FROM knowledge_record_mentions AS m JOIN knowledge_records AS r ON r.id = m.record_id "
            f"WHERE m.target_id = ?{bound} ORDER BY m.target_id DESC, m.record_id DESC LIMIT ?"
        )
        return self._docs(c.Record, sql, [*params, limit])

    def records_superseded_by(
        self, record_id: str, node_id: str, after: str | None, limit: int
    ) -> list[c.Record]:
        # Walks the node's (node_id, id) index, decoding only the rows that name the record.
        field = self.dialect.json_field("doc", "superseded_by")
        params: list[object] = [node_id, record_id]
        bound = ""
        if after is not None:
            bound = " AND id > ?"
            params.append(after)
        sql = (f"SELECT doc FROM knowledge_records WHERE node_id = ? AND {field} = ?{bound} "
               "ORDER BY node_id, id LIMIT ?")
        return self._docs(c.Record, sql, [*params, limit])

    def attribute_records(self, node_id: str, attribute: str) -> list[c.Record]:
        sql = f"SELECT doc FROM knowledge_records WHERE node_id = ? AND {self.dialect.json_field('doc', 'attribute')} = ?"
        return self._docs(c.Record, sql, (node_id, attribute))

    def attributes_records(self, node_id: str, attributes: Sequence[str]) -> list[c.Record]:
        found: list[c.Record] = []
        wanted = list(dict.fromkeys(attributes))
        for start in range(0, len(wanted), _ATTRIBUTES_A_QUERY):
            chunk = wanted[start : start + _ATTRIBUTES_A_QUERY]
            sql = (f"SELECT doc FROM knowledge_records WHERE node_id = ? AND "
                   f"{self.dialect.json_field('doc', 'attribute')} IN ({', '.join('?' * len(chunk))})")
            found += self._docs(c.Record, sql, (node_id, *chunk))
        return found

    def records_page(
        self, scope_keys: Sequence[str], *, after: str | None, newest_first: bool, limit: int,
        trust: str | None = None, source_thread_id: str | None = None, below: str | None = None,
    ) -> list[c.Record]:
        condition, params = self._at(scope_keys, below)
        for field, value in (("trust", trust), ("source_thread_id", source_thread_id)):
            if value is not None:
                condition += f" AND {self.dialect.json_field('doc', field)} = ?"
                params.append(value)
        if after is not None:
            condition += " AND id < ?" if newest_first else " AND id > ?"
            params.append(after)
        order = "id DESC" if newest_first else "id"
        sql = f"SELECT doc FROM knowledge_records WHERE {condition} ORDER BY {order} LIMIT ?"
        return self._docs(c.Record, sql, [*params, limit])

    # audit log and tombstones
    def add_event(self, event: c.ActivityEvent) -> None:
        self._execute(
            "INSERT INTO knowledge_events (id, scope, doc) VALUES (?, ?, ?)",
            (event.id, event.scope, event.model_dump_json()),
        )

    def events_in(self, scope_keys: Sequence[str]) -> list[c.ActivityEvent]:
        return self._in(c.ActivityEvent, "SELECT doc FROM knowledge_events WHERE {scope}", scope_keys)

    def events_page(
        self, scope_keys: Sequence[str], before: str | None, limit: int, below: str | None = None
    ) -> list[c.ActivityEvent]:
        condition, params = self._at(scope_keys, below)
        if before is not None:
            condition += " AND id < ?"
            params.append(before)
        sql = f"SELECT doc FROM knowledge_events WHERE {condition} ORDER BY id DESC LIMIT ?"
        return self._docs(c.ActivityEvent, sql, [*params, limit])

    def save_tombstone(self, tombstone: c.Tombstone) -> None:
        self._upsert(
            "knowledge_tombstones",
            (tombstone.id, tombstone.node_id, tombstone.scope, tombstone.model_dump_json()),
        )

    def tombstones_for(self, node_id: str) -> list[c.Tombstone]:
        return self._docs(c.Tombstone, "SELECT doc FROM knowledge_tombstones WHERE node_id = ?", (node_id,))

    def tombstones_in(self, scope_keys: Sequence[str]) -> list[c.Tombstone]:
        return self._in(c.Tombstone, "SELECT doc FROM knowledge_tombstones WHERE {scope}" + _REAL, scope_keys)

    # outbox and vectors
    def outbox_key_exists(self, idempotency_key: str) -> bool:
        row = self._execute(
            "SELECT 1 FROM knowledge_outbox WHERE idempotency_key = ?", (idempotency_key,)
        ).fetchone()
        return row is not None

    def save_outbox(self, entry: c.OutboxEntry) -> None:
        self._upsert(
            "knowledge_outbox", (entry.id, entry.idempotency_key, entry.status, entry.model_dump_json())
        )

    def open_outbox(self, after: str | None = None, limit: int | None = None) -> list[c.OutboxEntry]:
        if limit is None:
            return self._docs(c.OutboxEntry, OPEN_OUTBOX, [after or ""])
        return self._docs(c.OutboxEntry, OPEN_OUTBOX + " LIMIT ?", [after or "", limit])

    def outbox_entries(self, entry_ids: Collection[str]) -> list[c.OutboxEntry]:
        condition, params = self.dialect.in_list("id", list(dict.fromkeys(entry_ids)))
        return self._docs(c.OutboxEntry, f"SELECT doc FROM knowledge_outbox WHERE {condition} ORDER BY id", params)

    def all_outbox(self) -> list[c.OutboxEntry]:
        return self._docs(c.OutboxEntry, "SELECT doc FROM knowledge_outbox ORDER BY id")

    def put_vector(self, vector: c.StoredVector) -> None:
        data = np.ascontiguousarray(vector.vector, dtype=self.dialect.vector_dtype)
        self._upsert(
            "knowledge_vectors",
            (
                vector.document_id,
                vector.record_id,
                vector.scope,
                vector.embedder,
                int(data.shape[0]),
                data.tobytes(),
            ),
        )

    def delete_vector(self, document_id: str, scope: str | None) -> bool:
        if scope is None:
            cursor = self._execute("DELETE FROM knowledge_vectors WHERE document_id = ?", (document_id,))
        else:
            cursor = self._execute(
                "DELETE FROM knowledge_vectors WHERE document_id = ? AND scope = ?", (document_id, scope)
            )
        return cursor.rowcount > 0

    def vector_labels(self, after: str | None, limit: int, subtree: str | None) -> list[VectorLabel]:
        # In the primary key's order: a page reads what it returns (and, with ``under``, the
        # scope index narrows it), never the vectors themselves.
        condition = "document_id > ?"
        params: list[object] = [after or ""]
        if subtree is not None:
            within, within_params = self._subtree(subtree)
            condition += f" AND {within}"
            params.extend(within_params)
        sql = (f"SELECT document_id, record_id, scope, embedder, dimensions FROM knowledge_vectors "
               f"WHERE {condition} ORDER BY document_id LIMIT ?")  # fmt: skip
        return [VectorLabel(*row) for row in self._execute(sql, [*params, limit])]

    def record_labels(self, after: str | None, limit: int, subtree: str | None) -> list[RecordLabel]:
        # In the records' primary key order, each row's vector looked up by its primary key: a
        # page reads what it returns, whichever of its records have vectors.
        condition = "id > ?"
        params: list[object] = [after or ""]
        if subtree is not None:
            within, within_params = self._subtree(subtree)
            condition += f" AND {within}"
            params.extend(within_params)
        deleted = self.dialect.json_field("doc", "deleted_at")
        trust = self.dialect.json_field("doc", "trust")
        sql = (f"SELECT id, scope, {deleted} IS NULL AND {trust} <> ?, EXISTS (SELECT 1 FROM knowledge_vectors "
               f"WHERE document_id = ? || knowledge_records.id) FROM knowledge_records WHERE {condition} "
               "ORDER BY id LIMIT ?")  # fmt: skip
        document_prefix = c.record_document_id("")
        rows = self._execute(sql, [c.TrustState.REJECTED.value, document_prefix, *params, limit])
        return [RecordLabel(row[0], row[1], bool(row[2]), bool(row[3])) for row in rows]

    def vectors_in(self, scope_keys: Sequence[str] | None) -> list[c.StoredVector]:
        sql = "SELECT document_id, record_id, scope, embedder, vector FROM knowledge_vectors"
        params: list[object] = []
        if scope_keys is not None:
            condition, params = self.dialect.in_list("scope", scope_keys)
            sql += f" WHERE {condition}"
        sql += " ORDER BY document_id"
        dtype = self.dialect.vector_dtype
        return [
            c.StoredVector(
                row[0], row[1], row[2], row[3], np.frombuffer(row[4], dtype=dtype).astype(np.float32)
            )
            for row in self._execute(sql, params)
        ]

    # forgotten values: rows of knowledge_tombstones under FORGOTTEN_NODE_ID (see tables.py)
    def save_forgotten(self, forgotten: c.ForgottenValue) -> None:
        self._execute(
            "INSERT INTO knowledge_tombstones (id, node_id, scope, doc) VALUES (?, ?, ?, ?)",
            (forgotten.id, FORGOTTEN_NODE_ID, forgotten.scope, forgotten.model_dump_json()),
        )

    def forgotten(self, forgotten_id: str) -> c.ForgottenValue | None:
        sql = "SELECT doc FROM knowledge_tombstones WHERE id = ?" + _FORGOTTEN
        return self._one(c.ForgottenValue, sql, (forgotten_id,))

    def forgotten_in(self, scope_keys: Sequence[str]) -> list[c.ForgottenValue]:
        sql = "SELECT doc FROM knowledge_tombstones WHERE {scope}" + _FORGOTTEN
        return self._in(c.ForgottenValue, sql, scope_keys)

    # lifecycle
    def event(self, event_id: str) -> c.ActivityEvent | None:
        return self._one(c.ActivityEvent, "SELECT doc FROM knowledge_events WHERE id = ?", (event_id,))

    def tombstone(self, tombstone_id: str) -> c.Tombstone | None:
        sql = "SELECT doc FROM knowledge_tombstones WHERE id = ?" + _REAL
        return self._one(c.Tombstone, sql, (tombstone_id,))

    def _subtree(self, scope_key: str) -> tuple[str, tuple[object, ...]]:
        """The condition that ``scope`` is ``scope_key`` or below it (see ``tables.under``)."""
        condition = f"(scope = ? OR {self.dialect.prefix('scope')} = ?)"
        return condition, (scope_key, len(scope_key) + 1, scope_key + "/")

    def _under(self, cls: type[M], table: str, scope_key: str, extra: str = "") -> list[M]:
        condition, params = self._subtree(scope_key)
        return self._docs(cls, f"SELECT doc FROM {table} WHERE {condition}{extra} ORDER BY id", params)

    def nodes_under(self, scope_key: str) -> list[c.Node]:
        return self._under(c.Node, "knowledge_nodes", scope_key)

    def records_under(self, scope_key: str) -> list[c.Record]:
        return self._under(c.Record, "knowledge_records", scope_key)

    def events_under(self, scope_key: str) -> list[c.ActivityEvent]:
        return self._under(c.ActivityEvent, "knowledge_events", scope_key)

    def tombstones_under(self, scope_key: str) -> list[c.Tombstone]:
        return self._under(c.Tombstone, "knowledge_tombstones", scope_key, _REAL)

    def forgotten_under(self, scope_key: str) -> list[c.ForgottenValue]:
        return self._under(c.ForgottenValue, "knowledge_tombstones", scope_key, _FORGOTTEN)

    def delete_node(self, node_id: str) -> None:
        self._execute("DELETE FROM knowledge_nodes WHERE id = ?", (node_id,))
        self._execute("DELETE FROM knowledge_node_mentions WHERE node_id = ?", (node_id,))
        self.dialect.search_drop(self.conn, "node", node_id)

    def delete_record(self, record_id: str) -> None:
        self._execute("DELETE FROM knowledge_records WHERE id = ?", (record_id,))
        self._execute("DELETE FROM knowledge_record_mentions WHERE record_id = ?", (record_id,))
        self.dialect.search_drop(self.conn, "record", record_id)

    def delete_event(self, event_id: str) -> None:
        self._execute("DELETE FROM knowledge_events WHERE id = ?", (event_id,))

    def delete_tombstone(self, tombstone_id: str) -> None:
        self._execute("DELETE FROM knowledge_tombstones WHERE id = ?" + _REAL, (tombstone_id,))

    def delete_forgotten(self, forgotten_id: str) -> None:
        self._execute("DELETE FROM knowledge_tombstones WHERE id = ?" + _FORGOTTEN, (forgotten_id,))

    def delete_outbox_for(self, record_ids: Collection[str]) -> int:
        record_id = self.dialect.json_field("doc", "record_id")
        condition, params = self.dialect.in_list(record_id, list(record_ids))
        cursor = self._execute(f"DELETE FROM knowledge_outbox WHERE {condition}", params)
        return max(cursor.rowcount, 0)

    def delete_vectors_under(self, scope_key: str) -> int:
        condition, params = self._subtree(scope_key)
        cursor = self._execute(f"DELETE FROM knowledge_vectors WHERE {condition}", params)
        return max(cursor.rowcount, 0)

    def scope_keys(self, resource: str | None) -> set[str]:
        condition, params = "", []
        if resource is not None:  # a filter to read less; SQLite's LIKE ignores ASCII case: the caller filters exactly
            escaped = resource.replace("!", "!!").replace("%", "!%").replace("_", "!_")
            condition = " WHERE scope LIKE ? ESCAPE '!' OR scope LIKE ? ESCAPE '!'"
            params = [f"org:%/resource:{escaped}", f"org:%/resource:{escaped}/thread:%"]
        tables = ("knowledge_nodes", "knowledge_records", "knowledge_tombstones", "knowledge_events", "knowledge_vectors")
        sql = " UNION ".join(f"SELECT DISTINCT scope FROM {table}{condition}" for table in tables)
        return {row[0] for row in self._execute(sql, params * len(tables))}


def fill_search_index(conn: SqlConnection, dialect: SqlDialect) -> None:
    """Index every stored node's and record's search text (the migration that adds the index:
    a database written before it searches as it did)."""
    tables = SqlKnowledgeTables(conn, dialect)
    for node in tables._docs(c.Node, "SELECT doc FROM knowledge_nodes"):
        dialect.search_put(conn, "node", node.id, node.scope, node_search_text(node))
    for record in tables._docs(c.Record, "SELECT doc FROM knowledge_records"):
        dialect.search_put(conn, "record", record.id, record.scope, record_search_text(record))
