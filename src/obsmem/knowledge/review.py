"""The review queue: candidates wait for a human (or a trusted agent) to approve or reject.

Default reads return verified records only, so a candidate cannot reach an agent's context
before it is approved. Every decision is one audited mutation with the reviewer as actor.
Records are immutable, so an edit is an append of the corrected text followed by the removal
of the original; the append goes first, so a failure leaves the original in place rather than
losing both.
"""

from __future__ import annotations

import logging

from obsmem.errors import KnowledgeNotFoundError, ObsmemError
from obsmem.knowledge.repeats import drop_repeats
from obsmem.knowledge.wikilinks import resolve_mentions
from obsmem.knowledge.store.contract import KnowledgeStore, Page, Record, RecordDraft, RecordView, TrustState
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.knowledge.store.values import When

__all__ = ["ReviewQueue"]

logger = logging.getLogger("obsmem.knowledge")


class ReviewQueue:
    """Review decisions over one store, attributed to ``actor``."""

    def __init__(self, store: KnowledgeStore, actor: str) -> None:
        self.store = store
        self.actor = actor

    async def pending(
        self, scope: str, *, after: str | None = None, limit: int = 100, within: bool = False,
        threads: bool = False,
    ) -> Page[Record]:
        """Candidates visible from ``scope``, newest first; ``within``: only those stored at
        ``scope`` itself, the ones a reviewer acting there decides on (not its ancestors');
        ``threads``: for a resource scope, also those stored at its threads' scopes (where capture
        writes them), never a sibling resource's."""
        return await self.store.list_candidates(scope, after=after, limit=limit, within=within, threads=threads)

    async def deciding_scope(self, record_id: str, scope: str) -> str:
        """The scope a reviewer acting at ``scope`` decides ``record_id`` at: ``scope`` itself when
        it sees the record; for a resource scope, the thread scope under it where the record is
        stored (a resource does not see its threads' records, yet its reviewer decides on them);
        otherwise ``scope`` (the decision is then refused as not found)."""
        view = RecordView(include_candidates=True, include_superseded=True)
        if await self.store.get_record(record_id, scope, view) is not None:
            return scope
        if Scope.parse(scope).level is Level.RESOURCE:
            stored = await self.store.load_record(record_id)
            if stored is not None and stored.scope.startswith(scope + "/"):
                return stored.scope
        return scope

    async def approve(self, record_id: str, scope: str, *, reason: str) -> Record:
        return await self.store.set_trust(
            record_id, scope, TrustState.VERIFIED, actor=self.actor, reason=reason
        )

    async def reject(self, record_id: str, scope: str, *, reason: str, tombstone: bool = False) -> Record:
        """Reject; with ``tombstone=True`` the same value is also refused if captured again.

        What an agent removed as *superseded by* the rejected record (``Record.superseded_by``:
        an older value the rejected one was taken to replace) is restored, audited with this
        reviewer as actor: a rejected value replaces nothing. What repeats the rejected record (a
        pin, the learn agent's evidence) is removed with it, and a skill node quoting it cleared."""
        rejected = await self.store.set_trust(
            record_id, scope, TrustState.REJECTED, actor=self.actor, reason=reason, tombstone=tombstone
        )
        await self._restore_superseded(rejected, scope, reason)
        await drop_repeats(self.store, rejected, actor=self.actor, reason=reason)  # no copy outlives it
        return rejected

    async def _restore_superseded(self, rejected: Record, scope: str, reason: str) -> None:
        everything = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
        after: str | None = None
        while True:  # the records it superseded only, not the whole node (each rejection would read it)
            page = await self.store.list_superseded_by(rejected.id, scope, view=everything, after=after,
                                                       limit=500)
            for record in page.items:
                if record.superseded_by != rejected.id or record.deleted_at is None:
                    continue
                try:
                    await self.store.restore_record(
                        record.id, scope, actor=self.actor,
                        reason=f"restored: {rejected.id}, which superseded it, was rejected: {reason}"[:1000],
                    )
                except ObsmemError as refused:  # tombstoned or forgotten meanwhile: it stays removed
                    logger.info("knowledge record %s not restored: %s", record.id, refused)
            if page.next_cursor is None:
                return
            after = page.next_cursor

    async def edit(self, record_id: str, scope: str, new_text: str, *, reason: str) -> Record:
        """Replace a record's text: append the corrected (verified) record, then remove the old one."""
        original = await self.store.get_record(
            record_id, scope, RecordView(include_candidates=True, include_superseded=True)
        )
        if original is None:
            raise KnowledgeNotFoundError(
                f"Knowledge record '{record_id}' is not visible from '{scope}'; "
                "it cannot be edited from there."
            )
        mentions = await resolve_mentions(self.store, new_text, original.scope, original.scope)
        corrected = RecordDraft(
            original.node_id,
            new_text,
            original.scope,
            source_thread_id=original.source_thread_id,
            # Its valid time, not the edit's: a record stated without one holds from its capture,
            # and the copy taking the edit's moment would move an old value after newer ones.
            when=original.when if original.when is not None else When(start=original.captured_at),
            max_scope=original.max_scope,
            attribute=original.attribute,
            trust=TrustState.VERIFIED,
            metadata={**original.metadata, "edited_from": original.id},
            mentions=mentions,
        )
        replacement = await self.store.append_record(corrected, actor=self.actor, reason=reason)
        removed = await self.store.remove_record(original.id, scope, actor=self.actor, reason=reason)
        await drop_repeats(self.store, removed, actor=self.actor, reason=reason)  # they repeat the old text
        return replacement
