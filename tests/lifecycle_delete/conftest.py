"""The store the sentinel tests plant in, scan and delete from: each test runs on every adapter
(the in-memory store, a SQLite file, a PostgreSQL database copied from the migrated template),
the conformance suite's own fixture."""

from __future__ import annotations

from ..conformance.conftest import ADAPTERS, postgres_server, postgres_url, store  # noqa: F401
