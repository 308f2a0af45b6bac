"""The :class:`Knowledge` facade: one object over a knowledge store, an embedder and a reviewer.

It adds what the store deliberately does not know: wikilink parsing and resolution, fact-time
parsing, capture clamping, the review queue and fused search. Everything else is the store's
own call, reachable as :attr:`Knowledge.store`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, Self

from obsmem.clock import Clock
from obsmem.embeddings import Embedder, LexicalHashEmbedder
from obsmem.errors import ConfigError
from obsmem.knowledge.capture import CaptureOutcome, capture
from obsmem.knowledge.repeats import ANY_RECORD, clear_quoting_skills, drop_repeats, learned_copies, repeating
from obsmem.knowledge.review import ReviewQueue
from obsmem.knowledge.semantic_index import KnowledgeHit, SemanticIndex
from obsmem.knowledge.wikilinks import resolve_mentions
from obsmem.knowledge.store.contract import (
    DEFAULT_VIEW,
    KnowledgeStore,
    Node,
    Record,
    RecordDraft,
    RecordView,
    TrustState,
)
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.scopes import Level, Scope, parse_level
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.values import When, parse_when

__all__ = ["Knowledge"]

WhenInput = str | datetime | date | When


class Knowledge:
    """A scoped knowledge graph with audit, tombstones, review and semantic search.

    ::

        async with Knowledge.sqlite("knowledge.db", actor="curator") as knowledge:
            here = "org:acme/resource:alice/thread:t1"
            jane = await knowledge.node("Jane", "person", "org:acme/resource:alice")
            await knowledge.append(jane.id, "Jane moved to [[Berlin]]", here, reason="user said so",
                                   when="2026-07-01", attribute="city")
            hits = await knowledge.search("where does Jane live", here)

    ``actor`` is written to the audit log for every change made through this object.

    ``embedder``: what records are embedded with (default: :class:`LexicalHashEmbedder`). Given
    one, this object's drains also re-embed, a page at a time, the records another embedder
    indexed, and embed the live records that have no vector (see :meth:`drain`): the
    application that owns the store chose it. Left at the
    default (obsmem's commands, ``obsmem worker`` without ``--knowledge-embedder``, a script),
    it indexes what it writes but converts nobody's vectors: a tool opened on a store whose
    application embeds with another model would otherwise turn its index into the tool's, and
    the application back at its next drain. :meth:`reindex` converts on request, either way.

    Writes are scoped like reads: each acts from a scope (the node's or record's scope when it
    is created, the ``scope`` argument otherwise) and may only touch what that scope sees.
    Wikilinks may only point at nodes visible from the text's scope, and a node they create
    must lie within the record's ceiling. Refused writes raise and leave a ``write-refused``
    event in the audit log, at the acting scope.
    """

    def __init__(
        self, store: KnowledgeStore, *, embedder: Embedder | None = None, actor: str = "obsmem",
        reembed: bool | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder or LexicalHashEmbedder()
        self.actor = actor
        # ``reembed``: whether drains convert other embedders' vectors (default: an embedder was given)
        chosen = embedder is not None if reembed is None else reembed
        self.index = SemanticIndex(store, self.embedder, reembed=chosen)
        self.review = ReviewQueue(store, actor)

    @classmethod
    def in_memory(
        cls, *, embedder: Embedder | None = None, actor: str = "obsmem", clock: Clock | None = None
    ) -> Knowledge:
        return cls(InMemoryKnowledgeStore(clock=clock), embedder=embedder, actor=actor)

    @classmethod
    def sqlite(
        cls,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        actor: str = "obsmem",
        clock: Clock | None = None,
    ) -> Knowledge:
        return cls(SQLiteKnowledgeStore(path, clock=clock), embedder=embedder, actor=actor)

    @classmethod
    def postgres(
        cls,
        url: str,
        *,
        embedder: Embedder | None = None,
        actor: str = "obsmem",
        clock: Clock | None = None,
    ) -> Knowledge:
        """The graph in the PostgreSQL database at ``url``, shared by every process that opens it.

        psycopg is optional, so it is imported here, and its absence is a configuration error.
        """
        try:
            from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
        except ImportError as exc:
            raise ConfigError(
                "knowledge store",
                f"PostgreSQL needs extra packages that are not installed ({exc.name or exc})",
                allowed="pip install 'obsmem[postgres]' (psycopg[binary], psycopg-pool)",
            ) from exc
        return cls(PostgresKnowledgeStore(url, clock=clock), embedder=embedder, actor=actor)

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def node(
        self,
        name: str,
        kind: str,
        scope: str,
        *,
        content: str | None = None,
        description: str | None = None,
        reason: str = "node created",
        resolution_scope: str | None = None,
        default_scope: str | None = None,
    ) -> Node:
        """Create (or fetch, by scope and case-insensitive name) a node; links in ``content`` resolve."""
        mentions = await resolve_mentions(
            self.store, content, resolution_scope or scope, default_scope or scope
        )
        return await self.store.create_node(
            name,
            kind,
            scope,
            actor=self.actor,
            reason=reason,
            content=content,
            description=description,
            mentions=mentions,
        )

    async def append(
        self,
        node_id: str,
        text: str,
        scope: str,
        *,
        reason: str,
        source_thread_id: str | None = None,
        when: WhenInput | None = None,
        max_scope: Level | str = Level.ORG,
        attribute: str | None = None,
        trust: TrustState = TrustState.VERIFIED,
        metadata: Mapping[str, Any] | None = None,
        resolution_scope: str | None = None,
        default_scope: str | None = None,
    ) -> Record:
        """Append a record; links resolve from ``resolution_scope`` (default: the record's scope)."""
        fact_time = parse_when(when) if when is not None else None
        mentions = await resolve_mentions(self.store, text, resolution_scope or scope, default_scope or scope)
        draft = RecordDraft(
            node_id,
            text,
            scope,
            source_thread_id=source_thread_id,
            when=fact_time,
            max_scope=parse_level(max_scope),
            attribute=attribute,
            trust=trust,
            metadata=metadata,
            mentions=mentions,
        )
        return await self.store.append_record(draft, actor=self.actor, reason=reason)

    async def capture(
        self,
        node_id: str,
        text: str,
        *,
        context: Scope | str,
        proposed_level: Level | str,
        ceiling: Level | str,
        reason: str,
        source_thread_id: str | None = None,
        when: WhenInput | None = None,
        attribute: str | None = None,
        trust: TrustState = TrustState.CANDIDATE,
    ) -> CaptureOutcome:
        """Capture a model-proposed fact, clamped to ``ceiling`` (see :mod:`.capture`)."""
        return await capture(
            self.store,
            node_id,
            text,
            context=context,
            proposed_level=proposed_level,
            ceiling=ceiling,
            reason=reason,
            actor=self.actor,
            source_thread_id=source_thread_id,
            when=when,
            attribute=attribute,
            trust=trust,
        )

    async def remove(self, record_id: str, scope: str, *, reason: str, tombstone: bool = False) -> Record:
        """Remove a record, and the pins that repeat it (:mod:`obsmem.knowledge.repeats`)."""
        removed = await self.store.remove_record(
            record_id, scope, actor=self.actor, reason=reason, tombstone=tombstone
        )
        await drop_repeats(self.store, removed, actor=self.actor, reason=reason)
        return removed

    async def erase(self, record_ids: Sequence[str], scope: str, *, reason: str) -> dict[str, int]:
        """Hard-delete records (:meth:`KnowledgeStore.erase_records`): no history keeps them,
        nor a pin that repeats one, nor the learn agent's evidence record that repeats one (erased
        with them); the skill node such evidence is about has its content cleared where it quotes
        one (the learn agent writes the procedure of a support there)."""
        ids = list(record_ids)
        skills: dict[str, list[str]] = {}  # skill node id -> the texts of erased records it may quote
        for record_id in list(ids):
            record = await self.store.get_record(record_id, scope, ANY_RECORD)
            if record is None:
                continue
            evidence = await learned_copies(self.store, record)
            for copy in [*await repeating(self.store, record), *evidence]:
                if copy.id not in ids:
                    ids.append(copy.id)
            for copy in evidence:
                skills.setdefault(copy.node_id, []).append(record.text)
        counts = await self.store.erase_records(ids, scope, actor=self.actor, reason=reason)
        await clear_quoting_skills(self.store, skills, actor=self.actor, reason=reason)
        return counts

    async def rescope(self, record_id: str, scope: str, new_scope: str, *, reason: str) -> Record:
        return await self.store.rescope_record(record_id, scope, new_scope, actor=self.actor, reason=reason)

    async def raise_ceiling(
        self, record_id: str, scope: str, ceiling: Level | str, *, reason: str, privileged: bool = False
    ) -> Record:
        """Broaden a record's ceiling: privileged, refused (and audited) without ``privileged=True``.

        Any scope that sees a record could otherwise lift its ceiling and then promote it, so
        pass ``privileged=True`` only from an administrative path no agent or user input reaches.
        """
        return await self.store.raise_ceiling(
            record_id, scope, parse_level(ceiling), actor=self.actor, reason=reason, privileged=privileged
        )

    async def search(
        self, query: str, scope: str, *, view: RecordView = DEFAULT_VIEW, limit: int = 10
    ) -> list[KnowledgeHit]:
        """Fused lexical + semantic search over what ``scope`` may see (drains the index first)."""
        return await self.index.search(query, scope, view=view, limit=limit)

    async def drain(self) -> int:
        """Bring the semantic index up to date; returns the number of outbox entries applied.
        After an embedder change, each drain of an object given its embedder also re-embeds a
        page of the old records, and embeds a page of the live records without a vector, until it
        has looked through the store once (see :meth:`SemanticIndex.drain`); :meth:`reindex` does
        them all."""
        return await self.index.drain()

    async def reindex(self, *, scope: str | None = None) -> int:
        """Re-embed, with this object's embedder, every record another embedder indexed, and
        embed every live record that has no vector (its row lost: a restored table, the vectors
        deleted to reset the index) (with ``scope``: those stored at that scope or below it), in
        bounded pages through the outbox; returns how many records were queued. Search finds
        those records by their words meanwhile, and by meaning once embedded."""
        return await self.index.reindex(scope=scope)
