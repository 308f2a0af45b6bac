"""Moved to :mod:`obsmem.cli.worker`; this alias remains only until ``tests/postgres/test_postgres_store.py``
imports ``register`` from there. Delete it then (issue 11)."""

from __future__ import annotations

from obsmem.cli.worker import register

__all__ = ["register"]
