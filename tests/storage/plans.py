"""The work a store's query does, read from the database's plan of the exact statement the store sent.

Tests call the store as a user does, capture what it sent (:class:`SentToPostgres`,
:class:`SentToSQLite`), and ask the database how it runs that statement: PostgreSQL's
``EXPLAIN (ANALYZE, FORMAT JSON)`` counts the rows each scan read and threw away, SQLite's
``EXPLAIN QUERY PLAN`` says whether a table is scanned or searched and whether rows are sorted.
Counted, not timed.
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

__all__ = [
    "SentToPostgres", "SentToSQLite", "pg_nodes", "pg_outline", "pg_plan", "pg_rows_read", "sqlite_plan",
]

Plan = dict[str, Any]
_sqlite_connect = sqlite3.connect  # the real one, whoever patches sqlite3.connect later


class SentToPostgres:
    """Every ``(query, params)`` a :class:`psycopg.AsyncConnection` executes while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[tuple[str, Any]] = []
        execute = psycopg.AsyncConnection.execute

        async def recorded(conn: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
            self.log.append((str(query), params))
            return await execute(conn, query, params, **kwargs)

        monkeypatch.setattr(psycopg.AsyncConnection, "execute", recorded)

    def clear(self) -> None:
        self.log.clear()

    def only(self, containing: str) -> tuple[str, Any]:
        """The one statement sent whose text contains ``containing``."""
        found = [entry for entry in self.log if containing in entry[0]]
        assert len(found) == 1, found
        return found[0]


def pg_plan(url: str, query: str, params: Any, *, generic: bool = False) -> Plan:
    """``EXPLAIN (ANALYZE, FORMAT JSON)`` of ``query`` run with ``params``: the plan PostgreSQL
    makes for these values or, with ``generic``, the plan it caches for any values (the one a
    statement psycopg has prepared may switch to after a few executions)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if not generic:
            row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query, params).fetchone()
        else:
            text, values = _numbered(query, params)
            types = ", ".join(_pg_type(value) for value in values)
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE plan_under_test ({types}) AS {text}")
            row = conn.execute(
                sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE plan_under_test ({})").format(
                    sql.SQL(", ").join(sql.Literal(value) for value in values)
                )
            ).fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    plan: Plan = document[0]
    return plan


def pg_nodes(plan: Plan) -> Iterator[Plan]:
    """Every node of a plan, parents before their children (init plans and subplans included)."""
    stack = [plan["Plan"]]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.get("Plans", [])))


def pg_rows_read(plan: Plan, relation: str) -> int:
    """Rows the plan's scans of ``relation`` produced or read and discarded (a filter, a recheck)."""
    total = 0.0
    for node in pg_nodes(plan):
        if node.get("Relation Name") == relation:
            total += node["Actual Rows"] * node["Actual Loops"]
            total += node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
    return round(total)


def pg_outline(plan: Plan) -> str:
    """The plan's scans, one a line, for an assertion's message."""
    lines = []
    for node in pg_nodes(plan):
        if "Relation Name" in node:
            lines.append(
                f"{node['Node Type']} {node.get('Index Name', '')} on {node['Relation Name']}: "
                f"{node['Actual Rows'] * node['Actual Loops']:g} rows, "
                f"{node.get('Rows Removed by Filter', 0)} removed by filter"
            )
    return "\n".join(lines)


def _numbered(query: str, params: Any) -> tuple[str, list[Any]]:
    """``query`` with psycopg's ``%s`` / ``%(name)s`` placeholders as ``$1, $2, …``, and their values."""
    assert "%%" not in query, "escaped percent signs are not handled here"
    if isinstance(params, Mapping):
        names: list[str] = []

        def named(match: re.Match[str]) -> str:
            if match[1] not in names:
                names.append(match[1])
            return f"${names.index(match[1]) + 1}"

        return re.sub(r"%\((\w+)\)s", named, query), [params[name] for name in names]
    numbers = itertools.count(1)
    values = list(params) if isinstance(params, Sequence) else []
    return re.sub(r"%s", lambda _: f"${next(numbers)}", query), values


def _pg_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, str):
        return "text"
    raise AssertionError(f"no PostgreSQL type chosen for {value!r}")


class SentToSQLite:
    """Every statement (values filled in) the SQLite connections opened while installed run, and
    the virtual-machine instructions each ran (counted in units of :data:`STEP`)."""

    STEP = 10

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[str] = []
        self._started: list[tuple[str, list[int], int]] = []  # statement, its connection's count, count then

        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = _sqlite_connect(*args, **kwargs)
            steps = [0]

            def count() -> int:
                steps[0] += 1
                return 0  # go on

            def started(statement: str) -> None:
                self.log.append(statement)
                self._started.append((statement, steps, steps[0]))

            conn.set_progress_handler(count, self.STEP)
            conn.set_trace_callback(started)
            return conn

        monkeypatch.setattr(sqlite3, "connect", traced)

    def clear(self) -> None:
        self.log.clear()
        self._started.clear()

    def matching(self, start: str) -> list[str]:
        """The statements sent that start with ``start``."""
        return [statement for statement in self.log if statement.lstrip().startswith(start)]

    def steps_per_statement(self, start: str) -> list[int]:
        """For each statement that starts with ``start``: the instructions its connection ran from
        its start to the next statement's (a read's rows are stepped through before the next)."""
        costs = []
        for i, (statement, steps, at) in enumerate(self._started):
            if statement.lstrip().startswith(start):
                following = (later for _, counter, later in self._started[i + 1 :] if counter is steps)
                costs.append(next(following, steps[0]) - at)
        return costs


def sqlite_plan(path: Path, statement: str) -> list[str]:
    """The lines of SQLite's ``EXPLAIN QUERY PLAN`` for ``statement`` in the database at ``path``."""
    conn = _sqlite_connect(path)
    try:
        return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
    finally:
        conn.close()
