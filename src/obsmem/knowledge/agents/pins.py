"""Pins: records that must always be in the actor's context, within a token budget.

Pins are records on a reserved node named ``pinned`` (kind ``system``), written and removed
through the store like any record (actor ``pins``, or the user's name), so the audit log,
ceilings and tombstones apply. A pin is written at resource level (thread level under a
thread ceiling). Only the records :meth:`PinBoard.pin` wrote (metadata ``pin``) are pins: a
fact a client remembered about a node it named "pinned" is a fact, never a pin, and so never
passes ``max_pins``. A pin capture made repeats its record (metadata ``pin_source``), in that
record's scope, and goes with it (:mod:`obsmem.knowledge.repeats`); until then it is left out
once that record is rejected or removed some other way.

The rendered block keeps pins oldest first while they fit ``pins_tokens``; what does not fit
is *reported*: named in the block (so the actor knows pins were left out) and returned in
:attr:`PinnedBlock.dropped`, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from obsmem.errors import InvalidInputError, KnowledgeNotFoundError
from obsmem.knowledge.agents.common import AgentSettings
from obsmem.knowledge.repeats import ANY_RECORD, PIN_KIND, PIN_MARK, PIN_NODE, PIN_SOURCE, pin_nodes, pins_seen
from obsmem.knowledge.store.contract import KnowledgeStore, Node, Record, RecordDraft, TrustState
from obsmem.knowledge.store.scopes import Level, Scope, clamp_level
from obsmem.quoting import defuse

__all__ = ["PIN_NODE", "PinBoard", "PinnedBlock"]



@dataclass(frozen=True, slots=True)
class PinnedBlock:
    """The pins that fit (as text), and the ids of those that did not."""

    text: str
    shown: tuple[str, ...]
    dropped: tuple[str, ...]


class PinBoard:
    """Pin, unpin and render the pins a scope sees."""

    def __init__(self, store: KnowledgeStore, settings: AgentSettings, count_tokens: Callable[[str], int]) -> None:
        self.store = store
        self.settings = settings
        self.count = count_tokens

    async def _node(self, context: Scope, *, actor: str) -> Node:
        """The pin board's node: a ``system`` node named ``pinned`` at resource level (thread
        level under a thread ceiling), created if there is none."""
        level = clamp_level(Level.RESOURCE, self.settings.ceiling)
        usable = [n for n in await pin_nodes(self.store, context) if Scope.parse(n.scope).level <= level]
        for node in usable:
            if node.kind == PIN_KIND:
                return node
        created = await self.store.create_node(
            PIN_NODE, PIN_KIND, context.at(level).key, actor=actor, reason="pins: the pinned set"
        )
        return created  # an entity a client named "pinned" there already: pins are told by metadata

    async def pin(self, text: str, context: Scope, *, actor: str = "pins", reason: str = "pinned",
                  level: Level | None = None, source: str | None = None) -> Record:
        """Pin ``text`` (at resource level unless ``level``; clamped to the ceiling). ``source``:
        the record the pin repeats (capture's), so the pin goes when that record is rejected or
        removed."""
        if not text.strip():
            raise InvalidInputError("A pin needs some text.", argument="text")
        current = await self.list(context)
        if len(current) >= self.settings.max_pins:
            raise InvalidInputError(
                f"Pin limit reached ({self.settings.max_pins}); unpin something first.", argument="text"
            )
        node = await self._node(context, actor=actor)
        wanted = clamp_level(level if level is not None else Level.RESOURCE, self.settings.ceiling)
        scope = context.at(wanted).key
        metadata: dict[str, object] = {PIN_MARK: True}
        if source is not None:
            metadata[PIN_SOURCE] = source
        draft = RecordDraft(node.id, text.strip(), scope, max_scope=self.settings.ceiling,
                            trust=TrustState.VERIFIED, metadata=metadata)
        return await self.store.append_record(draft, actor=actor, reason=reason)

    async def unpin(self, record_id: str, context: Scope, *, actor: str = "pins", reason: str = "unpinned") -> Record:
        """Remove a pin the scope sees; any other record is refused as not found (its id is in
        contexts, a reminder's sources say it: unpinning must not remove facts)."""
        record = await self.store.get_record(record_id, context.key, ANY_RECORD)
        pins = {node.id for node in await pin_nodes(self.store, context)}
        if record is None or record.metadata.get(PIN_MARK) is not True or record.node_id not in pins:
            raise KnowledgeNotFoundError(
                f"Knowledge record '{record_id}' is not a pin visible from '{context.key}'; "
                "unpin takes the id of a pin (list_pins)."
            )
        return await self.store.remove_record(record_id, context.key, actor=actor, reason=reason)

    async def _source_stands(self, record: Record) -> bool:
        """A pin that repeats a record stands while that record is live and verified."""
        source = record.metadata.get(PIN_SOURCE)
        if source is None:
            return True
        held = await self.store.load_record(str(source))
        return held is not None and held.deleted_at is None and held.trust is TrustState.VERIFIED

    async def list(self, context: Scope) -> list[Record]:
        """The pins ``context`` sees, oldest first (a captured pin while its record stands)."""
        return [pin for pin in await pins_seen(self.store, context) if await self._source_stands(pin)]

    async def render(self, context: Scope) -> PinnedBlock:
        """The pinned block within ``pins_tokens``; pins that do not fit are named, not hidden."""
        pins = await self.list(context)
        if not pins:
            return PinnedBlock("", (), ())
        budget = self.settings.pins_tokens
        shown: list[Record] = []
        shown_lines: list[str] = []
        dropped: list[str] = []
        used = 0
        for pin in pins:
            line = f"  • {{id: {pin.id}}} {defuse(pin.text)}"  # data: one line, no tag
            cost = self.count(line)
            if dropped or used + cost > budget:
                dropped.append(pin.id)
                continue
            used += cost
            shown.append(pin)
            shown_lines.append(line)
        lines = [f"<pinned-knowledge count=\"{len(shown)}\">", *shown_lines]
        if dropped:
            lines.append(
                f"  ({len(dropped)} more pinned record(s) did not fit the {budget}-token pin budget: "
                + ", ".join(dropped) + ")"
            )
        lines.append("</pinned-knowledge>")
        return PinnedBlock("\n".join(lines), tuple(p.id for p in shown), tuple(dropped))
