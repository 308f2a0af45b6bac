"""Knowledge: obsmem's scoped, audited, bitemporal fact store (the "subconscious").

The public face is :class:`Knowledge`; the storage contract and the adapters are re-exported
so one import is enough::

    from obsmem.knowledge import Knowledge

    async with Knowledge.in_memory(actor="me") as knowledge:
        jane = await knowledge.node("Jane", "person", "org:acme")
        record = await knowledge.append(jane.id, "Jane leads [[Project X]]", "org:acme", reason="said so")
        about = await knowledge.store.list_about(jane.id, "org:acme/resource:alice")
        assert about.items[0].id == record.id

Scopes are canonical strings (``org:acme/resource:alice/thread:t1``); a read sees its own scope
and its ancestors, never a sibling thread.

``Knowledge.sqlite(path)`` and ``Knowledge.postgres(url)`` keep the graph in a database;
:class:`PostgresKnowledgeStore` is imported on first use, so psycopg stays optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from obsmem.knowledge.capture import CaptureOutcome, capture
from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.migrate import migrate_knowledge
from obsmem.knowledge.review import ReviewQueue
from obsmem.knowledge.semantic_index import KnowledgeHit, SemanticIndex, reciprocal_rank_fusion
from obsmem.knowledge.wikilinks import MAX_LINKS, extract_wikilinks, resolve_mentions
from obsmem.knowledge.store.contract import (
    ActivityAction,
    ActivityEvent,
    KnowledgeStore,
    Node,
    Page,
    Record,
    RecordDraft,
    RecordView,
    Tombstone,
    TrustState,
)
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.values import When, parse_when

if TYPE_CHECKING:
    from obsmem.knowledge.store.postgres import PostgresKnowledgeStore

__all__ = [
    "ActivityAction",
    "ActivityEvent",
    "CaptureOutcome",
    "InMemoryKnowledgeStore",
    "Knowledge",
    "KnowledgeHit",
    "KnowledgeStore",
    "Level",
    "MAX_LINKS",
    "Node",
    "Page",
    "PostgresKnowledgeStore",
    "Record",
    "RecordDraft",
    "RecordView",
    "ReviewQueue",
    "SQLiteKnowledgeStore",
    "Scope",
    "SemanticIndex",
    "Tombstone",
    "TrustState",
    "When",
    "capture",
    "extract_wikilinks",
    "migrate_knowledge",
    "parse_when",
    "reciprocal_rank_fusion",
    "resolve_mentions",
]


def __getattr__(name: str) -> object:
    """``PostgresKnowledgeStore`` on first use: its module imports psycopg, an optional dependency."""
    if name == "PostgresKnowledgeStore":
        from obsmem.knowledge.store.postgres import PostgresKnowledgeStore

        return PostgresKnowledgeStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
