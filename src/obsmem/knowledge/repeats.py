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
from obsmem.knowledge.store.contract import DEFAULT_VIEW, KnowledgeStore, Node, Record, RecordView, TrustState
from obsmem.knowledge.store.scopes import Level, Scope

__all__ = [
    "ANY_RECORD", "LEARN_ACTOR", "LEARN_EVIDENCE", "PIN_KIND", "PIN_MARK", "PIN_NODE", "PIN_SOURCE", "drop_repeats",
    "SKILL_CONTENT", "SKILL_KIND", "clear_quoting_skills", "learned_copies", "learned_source", "pin_nodes",
    "pins_seen", "repeating", "serves_skill",
]

#: A view of every record, whatever its trust, removal or validity (to find one to erase).
ANY_RECORD = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)

PIN_NODE = "pinned"
PIN_KIND = "system"
PIN_MARK = "pin"  # the metadata key PinBoard.pin sets: only such records are pins
PIN_SOURCE = "pin_source"  # the record a captured pin repeats

#: Records on one ``pinned`` node read per page while looking for a record's pins.
_PAGE = 500

LEARN_ACTOR = "learn"  # the learn agent: its evidence records repeat the records a skill was learned from
LEARN_EVIDENCE = "evidence"  # the metadata key naming the record an evidence record repeats
SKILL_KIND = "skill"  # the kind of node the learn agent writes
SKILL_CONTENT = 4000  # the learn agent keeps this much of a skill's procedure as its node's content
#: Evidence records read per skill node when deciding whether it is served (a skill has a few).
_EVIDENCE_PAGES = 4


def learned_source(source_thread_id: str | None) -> str:
    """The ``source_thread_id`` of the learn agent's evidence records for a record of that thread."""
    return f"subconscious:{source_thread_id or 'unknown'}:learn"


async def learned_copies(store: KnowledgeStore, record: Record) -> list[Record]:
    """The learn agent's evidence records that repeat ``record`` (stored at its scope, from its
    thread's learn lane): the records of that lane only, not the scope's."""
    found: list[Record] = []
    after: str | None = None
    while True:
        page = await store.list_by_source(learned_source(record.source_thread_id), record.scope, view=ANY_RECORD,
                                          after=after, limit=_PAGE)  # fmt: skip
        found += [r for r in page.items
                  if r.metadata.get(LEARN_EVIDENCE) == record.id and r.metadata.get("agent") == LEARN_ACTOR]
        if page.next_cursor is None:
            return found
        after = page.next_cursor


async def pin_nodes(store: KnowledgeStore, scope: Scope) -> list[Node]:
    """Every node named ``pinned`` that ``scope`` sees, broad → narrow, the ``system`` one first
    at a level (any kind: a client may have named an entity so; only the records
    :class:`~obsmem.knowledge.agents.pins.PinBoard` wrote on them are pins). A name is one node
    per scope: one lookup per level of the chain, never a listing of every node the scope sees
    (this runs for every context)."""
    found: dict[str, Node] = {}
    for level in range(Level.ORG, scope.level + 1):
        node = await store.resolve_node(PIN_NODE, scope.at(Level(level)).key)
        if node is not None:
            found[node.id] = node
    return sorted(found.values(), key=lambda n: (Scope.parse(n.scope).level, n.kind != PIN_KIND, n.id))


async def pins_seen(store: KnowledgeStore, scope: Scope) -> list[Record]:
    """The live pins ``scope`` sees (records with metadata ``pin``), in id order (oldest first)."""
    pins: dict[str, Record] = {}
    for node in await pin_nodes(store, scope):
        after: str | None = None
        while True:
            page = await store.list_about(node.id, scope.key, after=after, limit=_PAGE)
            pins.update((r.id, r) for r in page.items if r.metadata.get(PIN_MARK) is True)
            if page.next_cursor is None:
                break
            after = page.next_cursor
    return sorted(pins.values(), key=lambda r: r.id)


async def repeating(store: KnowledgeStore, record: Record) -> list[Record]:
    """The live pins that repeat ``record``: among those its scope sees (a pin is never
    narrower than the scope its record is read from)."""
    return [r for r in await pins_seen(store, Scope.parse(record.scope)) if r.metadata.get(PIN_SOURCE) == record.id]


async def drop_repeats(store: KnowledgeStore, record: Record, *, actor: str, reason: str) -> None:
    """Remove the pins and the learn agent's evidence records that repeat ``record`` (removed,
    rejected, or replaced by an edit), each at its own scope; one another writer removed meanwhile
    is skipped. A skill node quoting ``record`` has its content cleared."""
    evidence = [r for r in await learned_copies(store, record) if r.deleted_at is None]
    for copy in [*await repeating(store, record), *evidence]:
        try:
            await store.remove_record(copy.id, copy.scope, actor=actor, reason=f"its record went: {reason}")
        except KnowledgeNotFoundError:
            continue
    await clear_quoting_skills(store, {copy.node_id: [record.text] for copy in evidence}, actor=actor, reason=reason)


async def clear_quoting_skills(store: KnowledgeStore, skills: dict[str, list[str]], *, actor: str,
                               reason: str) -> None:
    """Clear the content of each skill node (id → texts gone) where it quotes one of those texts
    (the learn agent writes ``Procedure: <a support's text>`` there); its name stays."""
    for node_id, texts in skills.items():
        node = await store.load_node(node_id)
        if node is not None and node.content and any(
                text in node.content or node.content == f"Procedure: {text}"[:SKILL_CONTENT] for text in texts):
            await store.update_node(node.id, node.version, scope=node.scope, actor=actor, reason=reason,
                                    content="")  # fmt: skip


async def serves_skill(store: KnowledgeStore, node: Node) -> bool:
    """Whether a search may serve ``node``: any node but a learned skill; a skill the learn agent
    wrote (its evidence records say so) only while at least two of the records it was learned
    from are served (verified, live, current). A support rejected, removed, superseded or erased
    takes the skill out of what is served, whatever its content still says."""
    if node.kind != SKILL_KIND:
        return True
    sources: set[str] = set()
    learned = node.metadata.get("agent") == LEARN_ACTOR
    after: str | None = None
    for _ in range(_EVIDENCE_PAGES):
        page = await store.list_about(node.id, node.scope, view=ANY_RECORD, after=after, limit=_PAGE)
        for record in page.items:
            if record.metadata.get("agent") == LEARN_ACTOR and isinstance(record.metadata.get(LEARN_EVIDENCE), str):
                learned = True
                if record.deleted_at is None and record.trust is not TrustState.REJECTED:
                    sources.add(record.metadata[LEARN_EVIDENCE])
        if page.next_cursor is None:
            break
        after = page.next_cursor
    if not learned:
        return True  # a skill node an application wrote itself
    served = 0
    for source_id in sorted(sources):
        if await store.get_record(source_id, node.scope, DEFAULT_VIEW) is not None:
            served += 1
            if served == 2:
                return True
    return False
