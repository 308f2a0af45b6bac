"""Records that repeat another record's text: the pins capture makes (``capture_pinning``).

A captured pin (:class:`~obsmem.knowledge.agents.pins.PinBoard`) is a record on the reserved
``pinned`` node whose metadata ``pin_source`` names the record it repeats. Capture pins only
verified records (never a candidate, so never one a review rejects), in the record's own
scope, and the pin goes with its record: removing, editing or erasing the record through
:class:`~obsmem.knowledge.Knowledge` or its review queue does the same to its pins, so the
text never outlives the record (an erase erases the pins too). Here so the facade and the
review queue need nothing of the agents.
"""

from __future__ import annotations

from obsmem.errors import KnowledgeNotFoundError
from obsmem.knowledge.store.contract import KnowledgeStore, Record, RecordView
from obsmem.knowledge.store.scopes import Level, Scope

__all__ = ["ANY_RECORD", "PIN_MARK", "PIN_NODE", "PIN_SOURCE", "drop_repeats", "repeating"]

#: A view of every record, whatever its trust, removal or validity (to find one to erase).
ANY_RECORD = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)

PIN_NODE = "pinned"
PIN_MARK = "pin"  # the metadata key PinBoard.pin sets: only such records are pins
PIN_SOURCE = "pin_source"  # the record a captured pin repeats

#: Records on one ``pinned`` node read per page while looking for a record's pins.
_PAGE = 500


async def repeating(store: KnowledgeStore, record: Record) -> list[Record]:
    """The live pins that repeat ``record``: on the ``pinned`` nodes of its scope's chain (a
    pin is never narrower than the scope its record is read from), read from that scope."""
    chain = Scope.parse(record.scope)
    seen: set[str] = set()
    found: list[Record] = []
    for level in range(Level.ORG, chain.level + 1):
        node = await store.resolve_node(PIN_NODE, chain.at(Level(level)).key)
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        after: str | None = None
        while True:
            page = await store.list_about(node.id, record.scope, after=after, limit=_PAGE)
            found += [
                r for r in page.items
                if r.metadata.get(PIN_MARK) is True and r.metadata.get(PIN_SOURCE) == record.id
            ]
            if page.next_cursor is None:
                break
            after = page.next_cursor
    return found


async def drop_repeats(store: KnowledgeStore, record: Record, *, actor: str, reason: str) -> None:
    """Remove the pins that repeat ``record`` (removed, or replaced by an edit), each at its own
    scope; one another writer removed meanwhile is skipped."""
    for pin in await repeating(store, record):
        try:
            await store.remove_record(pin.id, pin.scope, actor=actor, reason=f"its record went: {reason}")
        except KnowledgeNotFoundError:
            continue
