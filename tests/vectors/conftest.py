"""One PostgreSQL database for the vector tests that only need an index of their own.

Indexes in one database are independent by ``name`` (that is tested in
``test_postgres_index.py``), so the shared behaviour suite gives each test a fresh name in a
shared database instead of paying for a fresh database per test.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from ..postgres_fixtures import PostgresServer, database_url

_index_names = itertools.count(1)


@pytest.fixture(scope="session")
def shared_vector_database_url(postgres_server: PostgresServer) -> Iterator[str]:
    name = postgres_server.create_database("obsmem_vectors")
    try:
        yield database_url(postgres_server.url, name)
    finally:
        postgres_server.drop_database(name)


@pytest.fixture
def fresh_index_name() -> str:
    return f"test_{next(_index_names)}"
