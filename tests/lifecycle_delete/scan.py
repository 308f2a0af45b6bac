"""Find a string anywhere a store keeps data: every table of SQLite and PostgreSQL, every
dictionary of the in-memory stores (message store and knowledge store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore

MESSAGE_TABLES = ("messages", "observation_records", "model_calls")
KNOWLEDGE_TABLES = (
    "knowledge_nodes",
    "knowledge_records",
    "knowledge_events",
    "knowledge_tombstones",
    "knowledge_outbox",
    "knowledge_vectors",
)


def _hits(value: object, needle: str) -> bool:
    if isinstance(value, bytes):
        return needle.encode() in value
    return needle in str(value)


def scan_sqlite(path: Path, needle: str, required: tuple[str, ...] = MESSAGE_TABLES) -> list[str]:
    found: list[str] = []
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert set(required) <= set(tables), tables
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                found += [f"{table}: {cell!r}"[:200] for cell in row if _hits(cell, needle)]
    return found


def scan_postgres(url: str, needle: str, required: tuple[str, ...] = MESSAGE_TABLES) -> list[str]:
    found: list[str] = []
    # bytea columns (a node's name key) print as hex
    hexed = {needle.encode().hex(), needle.casefold().encode().hex()}
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
        ]
        assert set(required) <= set(tables), tables
        for table in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{table}" AS t'):
                if needle in text or any(h in text for h in hexed):
                    found.append(f"{table}: {text[:200]}")
    return found


def scan_memory(store: object, needle: str) -> list[str]:
    found: list[str] = []

    def walk(name: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(name, key)
                walk(name, item)
        elif isinstance(value, list | tuple | set):
            for item in value:
                walk(name, item)
        elif hasattr(value, "model_dump"):
            walk(name, value.model_dump(mode="json"))
        elif _hits(value, needle):
            found.append(f"{name}: {value!r}"[:200])

    for name, value in vars(store).items():
        walk(name, value)
    return found


def scan(store: Store, needle: str) -> list[str]:
    if isinstance(store, SQLiteStore):
        return scan_sqlite(store.path, needle)
    if isinstance(store, PostgresStore):
        return scan_postgres(store.url, needle)
    assert isinstance(store, MemoryStore)
    return scan_memory(store, needle)


def scan_knowledge(store: KnowledgeStore, needle: str) -> list[str]:
    """Every knowledge table (nodes, mentions, records, events, tombstones and forgotten values,
    outbox, vectors) of a knowledge store of any adapter."""
    if isinstance(store, SQLiteKnowledgeStore):
        return scan_sqlite(store.path, needle, KNOWLEDGE_TABLES)
    if isinstance(store, PostgresKnowledgeStore):
        return scan_postgres(store.url, needle, KNOWLEDGE_TABLES)
    assert isinstance(store, InMemoryKnowledgeStore)
    return scan_memory(store.tables, needle)
