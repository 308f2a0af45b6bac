"""The capture agent: committed observation deltas in, candidate records out.

Offline by default (:mod:`.extract` rules, no model). Every write goes through the knowledge
store with ``actor="capture"`` and a one-sentence reason quoting the user, so ceilings,
tombstones, trust and the audit log apply to it:

* the node (``User`` for what the user said about themselves) is created idempotently at the
  configured node level, clamped to the ceiling;
* each record is clamped to the ceiling (:func:`obsmem.knowledge.capture.capture`), enters as
  ``candidate`` unless configured otherwise, and carries ``when`` (the time the conversation
  anchors), its ``attribute`` and, for a correction, the values it replaces;
* a fact already held (same node, a record whose words contain the new one's, or a
  near-duplicate) is not written again; records an *agent* removed count as held, so a
  superseded value is never resurrected by re-reading old observations;
* a value the user tombstoned is refused by the store, which audits the refusal
  (``write-refused``, actor ``capture``); the run reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from obsmem.errors import InvalidInputError
from obsmem.knowledge.capture import capture as capture_record
from obsmem.knowledge.agents.common import (
    AGENT_ACTORS,
    ALL_RECORDS,
    AgentRun,
    AgentSettings,
    content_tokens,
)
from obsmem.knowledge.agents.extract import Proposal, propose, statements
from obsmem.knowledge.store.contract import KnowledgeStore, Node, Record
from obsmem.knowledge.store.scopes import Scope, clamp_level
from obsmem.knowledge.store.values import near_duplicate, value_key

__all__ = ["CaptureAgent", "held"]

logger = logging.getLogger("obsmem.knowledge")

ACTOR = "capture"


def held(proposal_text: str, existing: Sequence[Record]) -> Record | None:
    """The existing record that already holds this fact, if any."""
    key = value_key(proposal_text)
    tokens = content_tokens(proposal_text)
    for record in existing:
        if record.deleted_at is not None and record.deleted_by not in AGENT_ACTORS:
            continue  # removed by a person: a tombstone (if any) decides, in the store
        if value_key(record.text) == key or near_duplicate(record.text, proposal_text):
            return record
        said = content_tokens(record.text)
        if tokens and (tokens == said or (len(tokens) >= 3 and tokens <= said)):
            return record  # two words inside a longer text ("Nadia Kessler" in an address) are no restatement
    return None


class CaptureAgent:
    """Offline capture over one knowledge store."""

    name = ACTOR

    def __init__(self, store: KnowledgeStore, settings: AgentSettings) -> None:
        self.store = store
        self.settings = settings

    async def _node(self, name: str, kind: str, context: Scope) -> Node:
        level = clamp_level(self.settings.node_level, self.settings.ceiling)
        scope = context.at(level).key
        found = await self.store.resolve_node(name, context.key)
        if found is not None:
            return found
        return await self.store.create_node(
            name, kind, scope, actor=ACTOR, reason=f"capture: first fact about {name}"
        )

    async def _existing(self, node: Node, context: Scope) -> list[Record]:
        records: list[Record] = []
        after: str | None = None
        while True:
            page = await self.store.list_about(node.id, context.key, view=ALL_RECORDS, after=after, limit=500)
            records.extend(page.items)
            if page.next_cursor is None:
                return records
            after = page.next_cursor

    async def proposals(self, observations: str, context: Scope, report: AgentRun) -> list[Proposal]:
        """What to capture from one delta (the offline rules; the LLM agent overrides this)."""
        found: list[Proposal] = []
        for statement in statements(observations):
            found.extend(propose(statement, node=statement.subject or self.settings.user_node))
        return found

    async def _pin(self, text: str, context: Scope, report: AgentRun) -> None:
        """``capture_pinning``: a standing rule ("always …", "never …") is also pinned; a pin the
        budget refuses is reported in the run, never silently dropped."""
        from obsmem.knowledge.agents.pins import PinBoard

        board = PinBoard(self.store, self.settings, lambda t: max(1, len(t) // 4))
        if any(pin.text == text for pin in await board.list(context)):
            return
        try:
            report.written.append(await board.pin(text, context, actor=ACTOR, reason="capture: a standing rule"))
        except InvalidInputError as refused:
            note = f"Capture-time pin dropped: {refused}"
            report.detail = f"{report.detail}; {note}" if report.detail else note

    async def run(self, observations: str, context: Scope, *, source_thread_id: str) -> AgentRun:
        """Capture the user's stated facts in ``observations`` (one committed delta)."""
        report = AgentRun("capture")
        proposals = await self.proposals(observations, context, report)
        if not proposals:
            report.status = "no-op"
            return report
        nodes: dict[str, Node] = {}
        existing: dict[str, list[Record]] = {}
        for proposal in proposals:
            node = nodes.get(proposal.node)
            if node is None:
                node = nodes[proposal.node] = await self._node(proposal.node, proposal.kind, context)
                existing[node.id] = await self._existing(node, context)
            if held(proposal.text, existing[node.id]) is not None:
                report.skipped += 1
                continue
            metadata: dict[str, object] = {"agent": ACTOR}
            if proposal.replaces:
                metadata["replaces"] = list(proposal.replaces)
            if proposal.value is not None:
                metadata["value"] = proposal.value
            outcome = await capture_record(
                self.store,
                node.id,
                proposal.text,
                context=context,
                proposed_level=proposal.level if proposal.level is not None else self.settings.record_level,
                ceiling=self.settings.ceiling,
                reason=proposal.reason,
                actor=ACTOR,
                source_thread_id=source_thread_id,
                when=proposal.when,
                attribute=proposal.attribute,
                trust=self.settings.trust,
                metadata=metadata,
            )
            if outcome.record is None:
                report.refused.append(proposal.text)
                continue
            report.written.append(outcome.record)
            existing[node.id].append(outcome.record)
            if proposal.pin and self.settings.capture_pinning:
                await self._pin(proposal.text, context, report)
        if not report.written and not report.refused:
            report.status = "no-op"
        return report
