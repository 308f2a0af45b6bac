"""Capture: writing a model-proposed fact, clamped to the ceiling instead of refused.

A capture model proposes a scope level for each fact. The configured ceiling is the broadest
level a fact may reach; a proposal above it is *narrowed* to the ceiling (the fact is still
worth keeping, just more privately), never rejected. The record stores the ceiling as its
``max_scope``, so no later rescope can lift it either.

A text (or an attribute, or a reason) that holds a secret (a password, an API key, a PIN:
:func:`~obsmem.knowledge.secrets.holds_secret`) is refused before anything is written (``refused-secret``): a model-proposed fact is never the
place a credential is kept, with or without the privacy boundary.

A value that was deleted with a tombstone (or a near-duplicate of it, see
:func:`~obsmem.knowledge.store.values.same_value`) is refused by the store, which records the
refusal as a ``write-refused`` audit event; capture turns that refusal into an outcome and a
log line instead of an exception, because an agent re-observing a fact the user deleted is
expected, not exceptional.

Wikilinks resolve from the record's own (clamped) scope, not from the full context: a record
stored at resource level may only link to nodes the whole resource sees.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from obsmem.errors import TombstonedValueError
from obsmem.knowledge.secrets import holds_secret
from obsmem.knowledge.wikilinks import resolve_mentions
from obsmem.knowledge.store.contract import KnowledgeStore, Record, RecordDraft, TrustState
from obsmem.knowledge.store.scopes import Level, Scope, clamp_level, parse_level
from obsmem.knowledge.store.values import When, parse_when

__all__ = ["CaptureOutcome", "capture"]

logger = logging.getLogger("obsmem.knowledge")


@dataclass(frozen=True, slots=True)
class CaptureOutcome:
    """``captured`` with the record, or ``refused-tombstoned`` / ``refused-secret`` with no record."""

    status: Literal["captured", "refused-tombstoned", "refused-secret"]
    scope: str
    clamped: bool
    record: Record | None = None
    detail: str = ""


async def capture(
    store: KnowledgeStore,
    node_id: str,
    text: str,
    *,
    context: Scope | str,
    proposed_level: Level | str,
    ceiling: Level | str,
    reason: str,
    actor: str,
    source_thread_id: str | None = None,
    when: str | datetime | date | When | None = None,
    attribute: str | None = None,
    trust: TrustState = TrustState.CANDIDATE,
    metadata: Mapping[str, Any] | None = None,
) -> CaptureOutcome:
    """Clamp, resolve wikilinks from the record's scope, append; a tombstoned value, or a text
    holding a secret, is refused."""
    chain = Scope.parse(context)
    ceiling_level = parse_level(ceiling)
    wanted = parse_level(proposed_level)
    level = clamp_level(wanted, ceiling_level)
    scope = chain.at(level).key
    if any(holds_secret(part) for part in (text, attribute or "", reason)):
        logger.info("knowledge capture refused: a text holding a secret in scope %s", scope,
                    extra={"obsmem_operation": "capture"})
        return CaptureOutcome("refused-secret", scope, level != wanted, None, "the text holds a secret")
    fact_time = parse_when(when) if when is not None else None
    mentions = await resolve_mentions(store, text, scope, scope)
    try:
        record = await store.append_record(
            RecordDraft(
                node_id,
                text,
                scope,
                source_thread_id=source_thread_id,
                when=fact_time,
                max_scope=ceiling_level,
                attribute=attribute,
                trust=trust,
                metadata=metadata,
                mentions=mentions,
            ),
            actor=actor,
            reason=reason,
        )
    except TombstonedValueError as refused:
        logger.info("knowledge capture refused: a tombstoned value in scope %s", scope,
                    extra={"obsmem_operation": "capture"})
        return CaptureOutcome("refused-tombstoned", scope, level != wanted, None, str(refused))
    return CaptureOutcome("captured", scope, level != wanted, record)
