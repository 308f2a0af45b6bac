"""Pins: records that must always be in the actor's context, within a token budget.

Pins are records on a reserved node named ``pinned`` (kind ``system``), written and removed
through the store like any record (actor ``pins``, or the user's name), so the audit log,
ceilings and tombstones apply. A pin is written at resource level (thread level under a
thread ceiling), and the node is found narrow → broad like any node.

The rendered block keeps pins oldest first while they fit ``pins_tokens``; what does not fit
is *reported*: named in the block (so the actor knows pins were left out) and returned in
:attr:`PinnedBlock.dropped`, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from obsmem.errors import InvalidInputError
from obsmem.knowledge.agents.common import AgentSettings
from obsmem.knowledge.store.contract import KnowledgeStore, Node, Record, RecordDraft, TrustState
from obsmem.knowledge.store.scopes import Level, Scope, clamp_level
from obsmem.quoting import defuse

__all__ = ["PIN_NODE", "PinBoard", "PinnedBlock"]

PIN_NODE = "pinned"


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

    async def _node(self, context: Scope, *, create: bool, actor: str) -> Node | None:
        found = await self.store.resolve_node(PIN_NODE, context.key)
        if found is not None or not create:
            return found
        level = clamp_level(Level.RESOURCE, self.settings.ceiling)
        return await self.store.create_node(
            PIN_NODE, "system", context.at(level).key, actor=actor, reason="pins: the pinned set"
        )

    async def pin(self, text: str, context: Scope, *, actor: str = "pins", reason: str = "pinned",
                  level: Level | None = None) -> Record:
        """Pin ``text`` (at resource level unless ``level``; clamped to the ceiling)."""
        if not text.strip():
            raise InvalidInputError("A pin needs some text.", argument="text")
        current = await self.list(context)
        if len(current) >= self.settings.max_pins:
            raise InvalidInputError(
                f"Pin limit reached ({self.settings.max_pins}); unpin something first.", argument="text"
            )
        node = await self._node(context, create=True, actor=actor)
        assert node is not None
        wanted = clamp_level(level if level is not None else Level.RESOURCE, self.settings.ceiling)
        scope = context.at(wanted).key
        draft = RecordDraft(node.id, text.strip(), scope, max_scope=self.settings.ceiling,
                            trust=TrustState.VERIFIED, metadata={"pin": True})
        return await self.store.append_record(draft, actor=actor, reason=reason)

    async def unpin(self, record_id: str, context: Scope, *, actor: str = "pins", reason: str = "unpinned") -> Record:
        return await self.store.remove_record(record_id, context.key, actor=actor, reason=reason)

    async def list(self, context: Scope) -> list[Record]:
        """The pins ``context`` sees, oldest first."""
        node = await self._node(context, create=False, actor="pins")
        if node is None:
            return []
        pins: list[Record] = []
        after: str | None = None
        while True:
            page = await self.store.list_about(node.id, context.key, after=after, limit=500)
            pins.extend(page.items)
            if page.next_cursor is None:
                break
            after = page.next_cursor
        return sorted(pins, key=lambda r: r.id)

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
