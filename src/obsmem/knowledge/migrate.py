"""``migrate_knowledge``: bring the knowledge tables of a database up to date, by URL.

The knowledge schema has its own numbered steps and version table (``_obsmem_knowledge_migrations``),
so it can share a database with the message store or not. ``obsmem migrate`` calls this next to
:meth:`obsmem.storage.Store.migrate`, with the store's URL, so one command brings both up to date.
"""

from __future__ import annotations

from pathlib import Path

from obsmem.errors import ConfigError
from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

__all__ = ["migrate_knowledge"]

_ACCEPTED = "memory://, sqlite:///path/to/file.db, postgresql://user@host/database"


async def migrate_knowledge(url: str, *, dry_run: bool = False) -> list[str]:
    """Apply the pending knowledge migrations in the database ``url`` names; their names.

    ``url`` is a store URL as :attr:`obsmem.storage.Store.url` gives it (``sqlite:///…``,
    ``postgresql://…``; ``memory://`` has nothing to migrate). With ``dry_run``, only list the
    pending steps. Safe to run from several processes at once.
    """
    async with _knowledge_store(url) as store:
        return await store.migrate(dry_run=dry_run)


def _knowledge_store(url: str) -> KnowledgeStore:
    text = url.strip()
    if text.startswith("memory://"):
        return InMemoryKnowledgeStore()
    if text.startswith("sqlite:///") and len(text) > len("sqlite:///"):
        return SQLiteKnowledgeStore(Path(text[len("sqlite:///") :]))
    if text.startswith(("postgresql://", "postgres://", "postgresql+")):
        from obsmem.knowledge.store.postgres import PostgresKnowledgeStore  # psycopg is optional

        return PostgresKnowledgeStore(text)
    raise ConfigError("store", f"'{url}' names no database with knowledge tables", allowed=_ACCEPTED)
