"""The knowledge store's lifecycle writes: forgetting a value, purging a scope, restoring a dump.

Written once against :class:`KnowledgeTables`, like :mod:`~obsmem.knowledge.store.ops`, and run
by the adapter in one transaction each, so a failure leaves nothing half-deleted.

Forgetting and purging are *hard* deletes: rows are removed, not marked, because a soft-deleted
record still holds its text. What remains is an audit event per operation that names no text,
and (for a forgotten value) a :class:`ForgottenValue`: a digest of the value's key, which
:meth:`KnowledgeMutations._check_tombstones` matches against later writes
(:func:`~obsmem.knowledge.store.values.forgotten_in`).

**Reach of a forget.** ``forget_value(value, scope)`` reaches the rows stored at ``scope``, at
its ancestors (what ``scope`` reads) and below it (its threads), never a sibling's. With
``within`` (a scope containing ``scope``), the ancestors broader than ``within`` are left alone:
a caller that may change only a resource's knowledge forgets there without touching the org's. A value is
matched inside a text on its :func:`~obsmem.knowledge.store.values.forget_key` (case, spacing,
punctuation and invisible characters do not hide it), or as a plain substring. Matched are
the texts a caller wrote, never ids or scope keys: a node's name, kind, content, description and
metadata; a record's text, attribute, metadata and ``deleted_by``; a tombstone's value, actor
and reason; an event's actor, reason and details.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Literal

from obsmem.errors import ImportConflictError, InvalidInputError, TombstonedValueError
from obsmem.knowledge.store.contract import (
    FORGOTTEN_PLACEHOLDER,
    ActivityAction,
    ActivityEvent,
    ForgottenValue,
    KnowledgeDump,
    Node,
    Record,
    Tombstone,
    TrustState,
    record_document_id,
)
from obsmem.knowledge.store.ops import KnowledgeMutations
from obsmem.knowledge.store.reads import shown_event, shown_record, shows_purge
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.knowledge.store.speakers import hidden_from
from obsmem.knowledge.store.tables import KnowledgeTables, name_key, under
from obsmem.knowledge.store.values import (
    exact_digest,
    exact_form,
    forget_key,
    forgotten_digest,
    forgotten_in,
    value_key,
)
from obsmem.storage.forgetting import json_strings

__all__ = ["check_forget_act", "dump_scope", "erase_records", "forget_value", "forgettable_texts", "purge_scope", "restore_dump"]

_FORGET_COUNTS = (
    "nodes",
    "nodes_scrubbed",
    "records",
    "tombstones",
    "events",
    "outbox",
    "vectors",
    "forgotten",
)
_PURGE_COUNTS = ("nodes", "records", "tombstones", "forgotten", "events", "outbox", "vectors")


class _Matcher:
    """Whether a text holds the value: its key inside the text's key, or a plain substring."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.key = forget_key(value)

    def __call__(self, *values: Any) -> bool:
        for text in json_strings(list(values), scalars=False):
            if self.value in text or (self.key and self.key in value_key(text)):
                return True
        return False


def _unique(*groups: Iterable[Any]) -> list[Any]:
    """Rows from several listings, once each, by id."""
    seen: dict[str, Any] = {}
    for group in groups:
        for row in group:
            seen.setdefault(row.id, row)
    return [seen[key] for key in sorted(seen)]


def _reach(t: KnowledgeTables, scope: Scope, within: Scope | None = None) -> KnowledgeDump:
    """The rows on ``scope``'s chain (up to ``within``, when given) and in its subtree."""
    chain = [key for key in scope.visible_keys() if within is None or within.contains(key)]
    return KnowledgeDump(
        nodes=_unique(t.nodes_in(chain), t.nodes_under(scope.key)),
        records=_unique(t.records_in(chain), t.records_under(scope.key)),
        tombstones=_unique(t.tombstones_in(chain), t.tombstones_under(scope.key)),
        forgotten=_unique(t.forgotten_in(chain), t.forgotten_under(scope.key)),
        events=_unique(t.events_in(chain), t.events_under(scope.key)),
    )


def _reaches(scope: Scope) -> Callable[[str], bool]:
    """Whether a row stored at a key lies in ``scope``'s export: on its chain or in its subtree."""
    return lambda key: scope.sees(key) or under(key, scope.key)


def dump_scope(t: KnowledgeTables, scope: str) -> KnowledgeDump:
    parsed = Scope.parse(scope)
    dump = _reach(t, parsed)
    own = {forgotten_digest(key) for key in parsed.visible_keys()}
    reaches = _reaches(parsed)
    # A speaker's fact an old version filed at org scope is its org's alone (:mod:`.speakers`).
    # Each row as this scope's reads show it: no link to a record or event it does not reach (a
    # sibling thread's successor, the event holding a removal's full reason there).
    return replace(
        dump,
        records=[shown_record(t, r, reaches) for r in dump.records if not hidden_from(r, parsed.key)],
        # ... and an event about a record narrowed since to where this scope does not reach, and
        # another resource's deletion (its audit log shows neither: :func:`.reads.shows_purge`)
        events=[
            shown_event(t, e, reaches) for e in dump.events
            if not hidden_from(e, parsed.key) and not _moved_away(t, e, parsed)
            and shows_purge(e, parsed.key, own)
        ],
    )


def _moved_away(t: KnowledgeTables, event: ActivityEvent, scope: Scope) -> bool:
    """Whether ``event`` is about a record now neither on ``scope``'s chain nor in its subtree."""
    if event.subject_type != "record" or event.action is ActivityAction.WRITE_REFUSED:
        return False
    record = t.record(event.subject_id)
    return record is not None and not (scope.sees(record.scope) or under(record.scope, scope.key))


ERASED_REASON = "reason withheld: it named a record erased since"
"""What an audit event's reason becomes when it named (and so may quote) an erased record."""

_SUPERSEDED_PAGE = 500


def _superseded_scopes(t: KnowledgeTables, records: Iterable[Record]) -> set[str]:
    """The scopes of the records removed as superseded by ``records`` (curation's removal reason
    names the newer record and quotes its text: "changed from … to …")."""
    scopes: set[str] = set()
    for record in records:
        after: str | None = None
        while True:
            page = t.records_superseded_by(record.id, record.node_id, after, _SUPERSEDED_PAGE)
            scopes.update(older.scope for older in page)
            if len(page) < _SUPERSEDED_PAGE:
                break
            after = page[-1].id
    return scopes


def _resource_scopes(records: Iterable[Record]) -> set[str]:
    """The resource scopes above the thread-scope ones of ``records``: curation in a thread removes
    a record of its resource as stale, or as a duplicate, because of a thread's record (no
    ``superseded_by`` links them) and logs the removal there, its reason quoting that record."""
    scopes: set[str] = set()
    for record in records:
        scope = Scope.parse(record.scope)
        if scope.level is Level.THREAD:
            scopes.add(scope.at(Level.RESOURCE).key)
    return scopes


def _removed_above_scopes(t: KnowledgeTables, records: Iterable[Record]) -> set[str]:
    """The scopes above ``records``' own (their org's, a thread's resource's) where a record of
    the same node was removed: curation removes a broader record as stale or as a duplicate
    because of a narrower one of its node (no ``superseded_by`` links them) and logs the removal
    at the removed record's scope, its reason quoting the narrower record. Read a page of the
    node's records at a time (their node only, never a whole scope's events blindly)."""
    scopes: set[str] = set()
    seen: set[tuple[str, str]] = set()
    for record in records:
        own = Scope.parse(record.scope)
        above = {own.at(level).key for level in Level if level < own.level}
        if not above or (record.node_id, record.scope) in seen:
            continue
        seen.add((record.node_id, record.scope))
        before: str | None = None
        while True:
            page = t.records_about_page(record.node_id, before, _SUPERSEDED_PAGE)
            scopes.update(r.scope for r in page if r.scope in above and r.deleted_at is not None)
            if len(page) < _SUPERSEDED_PAGE:
                break
            before = page[-1].id
    return scopes


def _delete_events_about(t: KnowledgeTables, records: Iterable[Record]) -> int:
    """Delete the audit events about ``records`` logged on each one's chain: its scope and those
    above it, where it lived before a narrowing (``rescope``) left them, a ``record-created``
    reason quoting its text (a trust change or a rescope may quote it too). The number deleted.

    An event about another record whose reason names one of ``records`` (curation removing a
    record as a duplicate of, stale by, or superseded by it quotes its text) keeps its action and
    subject, its reason replaced by :data:`ERASED_REASON`: read in the same scopes, in those of
    the records superseded by them, in the resource scope above a thread-scope one (a record
    of the resource removed as stale or as a duplicate because of it: nothing links the two), and
    in each scope above where a record of the same node was removed (an org's plan made stale).
    A removal's event that names the event holding its full reason in a narrower scope
    (``details["reason_event"]``) takes that one with it."""
    records = list(records)
    ids = {record.id for record in records}
    # The scopes each lived in: its own, then (following its record-rescoped events' "from") those
    # it was moved from. Never the whole chain blindly: that read every user's org-scope events on
    # each erase of a fact that never left its user's scope.
    pending = {record.scope for record in records} | (
        _superseded_scopes(t, records) | _resource_scopes(records) | _removed_above_scopes(t, records)
        if ids else set()
    )
    read: set[str] = set()
    events_gone: set[str] = set()
    deleted = 0
    while pending and ids:
        keys = sorted(pending)
        read.update(keys)
        pending = set()
        for event in t.events_in(keys):
            if event.subject_type != "record" or event.subject_id not in ids:
                if any(record_id in event.reason for record_id in ids):
                    t.delete_event(event.id)
                    t.add_event(event.model_copy(update={"reason": ERASED_REASON}))
                continue
            if event.action is ActivityAction.RECORD_RESCOPED:
                came_from = (event.details or {}).get("from")
                if isinstance(came_from, str) and came_from not in read:
                    pending.add(came_from)
            full = (event.details or {}).get("reason_event")
            if isinstance(full, str) and full not in events_gone:
                # a removal for a narrower scope's record logged its full reason there (quoting
                # this record too): :meth:`KnowledgeStore.remove_record`'s ``reason_within``. Not
                # counted: a purge of that scope may have deleted it already.
                t.delete_event(full)
                events_gone.add(full)
            if event.id not in events_gone:
                t.delete_event(event.id)
                events_gone.add(event.id)
                deleted += 1
    return deleted


def _drop_mentions(m: KnowledgeMutations, gone: set[str]) -> None:
    """Remove links to deleted nodes from the nodes and records that remain."""
    t = m.t
    for node_id in sorted(gone):
        for node in t.nodes_mentioning(node_id):
            if node.id in gone:
                continue
            kept = tuple(target for target in node.mentions if target not in gone)
            t.save_node(
                node.model_copy(update={"mentions": kept, "version": node.version + 1, "updated_at": m.now})
            )
        for record in t.records_mentioning(node_id):
            kept = tuple(target for target in record.mentions if target not in gone)
            t.save_record(record.model_copy(update={"mentions": kept}))


def _unlink_successors(t: KnowledgeTables, records: list[Record], ids: set[str]) -> None:
    """Clear the ``superseded_by`` of the records that remain and name one of ``records`` (about
    to be hard-deleted): what is deleted leaves no id behind, and a removal whose successor is
    gone dates nothing by it (a plain removal, as the reads take it)."""
    for record in records:
        after: str | None = None
        while True:
            page = t.records_superseded_by(record.id, record.node_id, after, _SUPERSEDED_PAGE)
            for older in page:
                if older.id not in ids:
                    t.save_record(older.model_copy(update={"superseded_by": None}))
            if len(page) < _SUPERSEDED_PAGE:
                break
            after = page[-1].id


def _unlink_reason_events(t: KnowledgeTables, deleted: Iterable[ActivityEvent]) -> None:
    """Drop ``details["reason_event"]`` from the events that remain and name one of ``deleted``
    (a removal's full reason logged in a narrower scope, purged or forgotten since): no id of
    a deleted event stays. Reads the scopes those removals were logged at only."""
    gone: dict[str, str] = {}
    for event in deleted:
        logged_at = (event.details or {}).get("logged_at")
        if isinstance(logged_at, str):
            gone[event.id] = logged_at
    if not gone:
        return
    for event in t.events_in(sorted(set(gone.values()))):
        if (event.details or {}).get("reason_event") in gone:
            t.delete_event(event.id)
            t.add_event(event.model_copy(
                update={"details": {k: v for k, v in event.details.items() if k != "reason_event"}}
            ))


def _delete_records(m: KnowledgeMutations, records: Iterable[Record], counts: dict[str, int]) -> None:
    records = list(records)
    _unlink_successors(m.t, records, {record.id for record in records})
    ids = sorted({record.id for record in records})
    for record_id in ids:
        m.t.delete_record(record_id)
        if m.t.delete_vector(record_document_id(record_id), None):
            counts["vectors"] += 1
    counts["records"] += len(ids)
    if ids:
        counts["outbox"] += m.t.delete_outbox_for(ids)


def _check_act(text: str, what: str, holds: _Matcher) -> None:
    if not text.strip():
        raise InvalidInputError(f"The {what} is empty; give a non-blank {what}.", argument=what)
    if holds(text):
        raise InvalidInputError(
            f"The {what} of a forget holds the forgotten value itself, so the audit log would keep it; "
            f"give a {what} that does not.",
            argument=what,
        )


def holds_value(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` as a forget matches it (its key inside the text's key, or a
    plain substring): what :func:`forget_value` refuses in a forget's actor or reason."""
    return _Matcher(value)(text)


def check_forget_act(value: str, *, actor: str, reason: str) -> None:
    """What :func:`forget_value` refuses before it changes anything, for a caller that erases
    elsewhere first (``Memory.forget``: messages and observations, then knowledge): an actor or a
    reason that is blank or holds the value (the audit log would keep it)."""
    holds = _Matcher(value)
    _check_act(actor, "actor", holds)
    _check_act(reason, "reason", holds)


def forget_value(
    m: KnowledgeMutations, value: str, scope: str, *, actor: str, reason: str, within: str | None = None
) -> dict[str, int]:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("Forgetting needs a non-blank value.", argument="value")
    target = Scope.parse(scope)
    ceiling = None if within is None else Scope.parse(within)
    if ceiling is not None and not ceiling.contains(target):
        raise InvalidInputError(f"The scope '{scope}' is not within '{within}': forget in a scope at or below it.",
                                argument="within")  # fmt: skip
    holds = _Matcher(value)
    _check_act(actor, "actor", holds)
    _check_act(reason, "reason", holds)
    t = m.t
    counts = dict.fromkeys(_FORGET_COUNTS, 0)
    reach = _reach(t, target, ceiling)

    doomed_nodes = {n.id: n for n in reach.nodes if holds(n.name, n.kind)}
    for node in reach.nodes:
        if node.id in doomed_nodes:
            continue
        changes: dict[str, Any] = {}
        if node.content is not None and holds(node.content):
            changes["content"] = None
        if node.description is not None and holds(node.description):
            changes["description"] = None
        if holds(node.metadata):
            changes["metadata"] = {k: v for k, v in node.metadata.items() if not holds(k, v)}
        if changes:
            t.save_node(node.model_copy(update={**changes, "version": node.version + 1, "updated_at": m.now}))
            counts["nodes_scrubbed"] += 1
    doomed_records = [
        r for r in reach.records if holds(r.text, r.attribute or "", r.metadata, r.deleted_by or "")
    ]
    for node_id in doomed_nodes:  # a node's records go with it, wherever they are
        doomed_records.extend(t.records_about(node_id))
    _delete_records(m, doomed_records, counts)
    for node_id in doomed_nodes:
        t.delete_node(node_id)
        for tombstone in t.tombstones_for(node_id):
            t.delete_tombstone(tombstone.id)
            counts["tombstones"] += 1
    counts["nodes"] = len(doomed_nodes)
    _drop_mentions(m, set(doomed_nodes))

    refuse_at = {target.key}
    for tombstone in reach.tombstones:
        if tombstone.node_id in doomed_nodes or not holds(tombstone.value, tombstone.actor, tombstone.reason):
            continue
        t.delete_tombstone(tombstone.id)
        counts["tombstones"] += 1
        if holds(tombstone.value) and target.sees(tombstone.scope):
            # it refused the value above this scope: keep refusing there
            refuse_at.add(tombstone.scope)
    forgotten_events = [e for e in reach.events if holds(e.actor, e.reason, e.details)]
    for event in forgotten_events:
        t.delete_event(event.id)
        counts["events"] += 1
    _unlink_reason_events(t, forgotten_events)

    digest = forgotten_digest(holds.key) if holds.key else ""
    form = exact_form(value)
    exact = None if form is None else (exact_digest(form), len(form))
    subject = m.ids.new()
    # A value without a letter or digit (a door code of symbols, an emoji) has no key: the knowledge
    # store refuses nothing by it (length 0), but its exact digest keeps it from an import.
    if holds.key or exact is not None:
        existing = {(f.scope, f.digest): f for f in t.forgotten_in(sorted(refuse_at))}
        for key in sorted(refuse_at):
            if (key, digest) in existing:
                found = existing[(key, digest)]
                if key == target.key:
                    subject = found.id
                widened = _with_exact(found, exact)
                if widened is not found:
                    t.delete_forgotten(found.id)
                    t.save_forgotten(widened)
                continue
            forgotten = ForgottenValue(
                id=subject if key == target.key else m.ids.new(),
                scope=key,
                digest=digest,
                length=len(holds.key),
                actor=actor,
                reason=reason,
                created_at=m.now,
                exact_digests=None if exact is None else (exact,),
            )
            t.save_forgotten(forgotten)
            counts["forgotten"] += 1
    m._event(
        ActivityAction.VALUE_FORGOTTEN,
        "tombstone",
        subject,
        target.key,
        actor,
        reason,
        details={"digest": digest, "counts": dict(counts)},
    )
    return counts


def _with_exact(row: ForgottenValue, exact: tuple[str, int] | None) -> ForgottenValue:
    """``row`` (a value forgotten under the same key before) also matching this forget's exact
    value: "ann" after "Ann" adds its digest; a row matched broadly already (an older obsmem's,
    or a phone number's) stays so, and a phone number forgotten now makes the row broad."""
    if row.exact_digests is None or (exact is not None and exact in row.exact_digests):
        return row
    return row.model_copy(update={"exact_digests": None if exact is None else (*row.exact_digests, exact)})


def erase_records(
    m: KnowledgeMutations, record_ids: Iterable[str], scope: str, *, actor: str, reason: str
) -> dict[str, int]:
    """Hard-delete the records (each visible to ``scope``, as for a removal), their vectors,
    outbox entries and the audit events about them; one ``record-deleted`` event each (marked
    ``erased``, holding no text) stays. What a caller's "delete" means where history must not
    keep the value (LangGraph's ``BaseStore.delete``); a removal (``remove_record``) keeps it."""
    if not reason.strip():
        raise InvalidInputError("The reason is empty; give a non-blank reason.", argument="reason")
    records = [m._visible_record(rid, scope, "erase_records", actor, reason) for rid in dict.fromkeys(record_ids)]
    counts = dict.fromkeys(("records", "events", "outbox", "vectors"), 0)
    counts["events"] += _delete_events_about(m.t, records)
    _delete_records(m, records, counts)
    for record in records:
        m._event(ActivityAction.RECORD_DELETED, "record", record.id, record.scope, actor, reason,
                 details={"erased": True})  # fmt: skip
    return counts


def purge_scope(m: KnowledgeMutations, scope: str, *, actor: str, reason: str) -> dict[str, int]:
    target = Scope.parse(scope)
    if not actor.strip() or not reason.strip():
        raise InvalidInputError("A purge needs a non-blank actor and reason.", argument="reason")
    t = m.t
    key = target.key
    counts = dict.fromkeys(_PURGE_COUNTS, 0)
    nodes = {n.id: n for n in t.nodes_under(key)}
    records: list[Record] = list(t.records_under(key))
    for node_id in nodes:  # records about a purged node go too (by the scope rules, all are below)
        records.extend(t.records_about(node_id))
    counts["events"] += _delete_events_about(t, records)  # above the scope (below: all go next)
    _delete_records(m, records, counts)
    for node_id in nodes:
        t.delete_node(node_id)
        for tombstone in t.tombstones_for(node_id):
            t.delete_tombstone(tombstone.id)
            counts["tombstones"] += 1
    counts["nodes"] = len(nodes)
    _drop_mentions(m, set(nodes))
    for tombstone in t.tombstones_under(key):
        t.delete_tombstone(tombstone.id)
        counts["tombstones"] += 1
    for forgotten in t.forgotten_under(key):
        t.delete_forgotten(forgotten.id)
        counts["forgotten"] += 1
    purged_events = t.events_under(key)
    for event in purged_events:
        t.delete_event(event.id)
        counts["events"] += 1
    _unlink_reason_events(t, purged_events)
    counts["vectors"] += t.delete_vectors_under(key)
    if target.level is Level.ORG:
        # Nothing is above an org to log at: an event at the org's own key would keep the id
        # that was asked to be gone (and list_scopes would name it). The counts go to the caller.
        return counts
    # The audit entry stays above the purged scope and names it only by digest: the scope key
    # holds the resource id, which is what was asked to be gone.
    parent = target.at(Level(target.level - 1))
    m._event(
        ActivityAction.SCOPE_PURGED,
        "scope",
        forgotten_digest(key),
        parent.key,
        actor,
        reason,
        details={"level": target.level.label, "counts": dict(counts)},
    )
    return counts


def forgettable_texts(row: Node | Record | Tombstone | ActivityEvent) -> tuple[Any, ...]:
    """The texts of a row a forget matches (what :func:`forget_value` reads of each kind)."""
    if isinstance(row, Node):
        return (row.name, row.kind, row.content or "", row.description or "", row.metadata)
    if isinstance(row, Record):
        return (row.text, row.attribute or "", row.metadata, row.deleted_by or "")
    if isinstance(row, Tombstone):
        return (row.value, row.actor, row.reason)
    return (row.actor, row.reason, row.details)


def _refuse_forgotten(
    m: KnowledgeMutations,
    rows: list[Node | Record | Tombstone | ActivityEvent],
    restored: Iterable[ForgottenValue],
    subtree: str,
) -> None:
    """A restored row holding a value forgotten on its scope's chain (stored, or restored with it)
    is refused as tombstoned, like any other write of it; nothing of the restore is written."""
    extra = list(restored)
    seen: dict[str, list[ForgottenValue]] = {}
    for row in rows:
        if row.scope not in seen:
            keys = Scope.parse(row.scope).visible_keys()
            seen[row.scope] = [*m.t.forgotten_in(keys), *(f for f in extra if f.scope in keys)]
        applying = seen[row.scope]
        if not applying:
            continue
        texts = list(json_strings(list(forgettable_texts(row)), scalars=False))
        # one pass per distinct length over all of them; the entry that matched is looked for only then
        if not any(forgotten_in(text, [(f.digest, f.length) for f in applying]) for text in texts):
            continue
        for entry in applying:
            if any(forgotten_in(text, [(entry.digest, entry.length)]) for text in texts):
                kind: Literal["node", "record", "tombstone"] = "record"
                node_id, subject = row.id, row.id
                if isinstance(row, Record):
                    node_id = row.node_id
                elif isinstance(row, Node):
                    kind = "node"
                elif isinstance(row, Tombstone):
                    kind, node_id = "tombstone", row.node_id
                else:  # an audit event: refused as the write it records
                    kind = "record" if row.subject_type == "record" else "node"
                    node_id = subject = row.subject_id
                raise m._refuse(
                    TombstonedValueError(node_id, entry.scope, FORGOTTEN_PLACEHOLDER),
                    "tombstoned",
                    "restore_dump",
                    kind,
                    subject,
                    subtree,
                    "restore",
                    "refused: a restored row holds a forgotten value",
                )


def _place(existing: Any, row: Any, subtree: str, what: str) -> bool:
    """Whether to write ``row``: refused if its id is taken under the subtree or taken by a
    different row above it, or if it is new and lies neither under the subtree nor on its chain
    (another resource's or org's: restoring it would plant it there); skipped if the same row is
    already stored outside the subtree."""
    if existing is None:
        if not (under(row.scope, subtree) or Scope.parse(subtree).sees(row.scope)):  # another user's
            raise InvalidInputError(
                f"Cannot restore knowledge {what} '{row.id}' at '{row.scope}': it lies outside '{subtree}' "
                "(neither on its chain nor below it); nothing was restored.",
                argument="dump",
            )
        return True
    if under(row.scope, subtree) or existing != row:
        raise ImportConflictError(f"the knowledge store already holds a {what} '{row.id}'")
    return False


def _place_forgotten(t: KnowledgeTables, row: ForgottenValue, subtree: str) -> ForgottenValue | None:
    """What to write for a restored forgotten value (None: nothing), as :func:`_place` decides.
    A later forget of the same key in another case ("ann" after "Ann") adds its exact digest to
    the stored row (:func:`_with_exact`), so a backup written between the two holds the row with
    fewer digests: still the same row, and when it is stored above the subtree, the stored row is
    kept (matching what both do, should the backup's match more)."""
    existing = t.forgotten(row.id)
    if existing is not None and not under(row.scope, subtree):
        merged = _merged_exact(existing, row)
        if merged is not None:
            return None if merged == existing else merged
    return row if _place(existing, row, subtree, "forgotten value") else None


def _merged_exact(existing: ForgottenValue, row: ForgottenValue) -> ForgottenValue | None:
    """``existing`` matching what ``row`` matches too, or None when they differ in more than their
    exact digests."""
    if existing.model_copy(update={"exact_digests": row.exact_digests}) != row:
        return None
    if existing.exact_digests is None or row.exact_digests is None:
        return existing.model_copy(update={"exact_digests": None})
    extra = tuple(pair for pair in row.exact_digests if pair not in existing.exact_digests)
    return existing.model_copy(update={"exact_digests": (*existing.exact_digests, *extra)}) if extra else existing


def restore_dump(m: KnowledgeMutations, dump: KnowledgeDump, *, subtree: str) -> dict[str, int]:
    t = m.t
    key = Scope.parse(subtree).key
    reaches = _reaches(Scope.parse(subtree))
    counts = dict.fromkeys(("nodes", "records", "tombstones", "forgotten", "events"), 0)

    # A row stored above the subtree is compared as the subtree's export shows it (without a
    # link to what the export does not reach, see dump_scope): its own export restores as is.
    def stored_record(record_id: str) -> Record | None:
        stored = t.record(record_id)
        return None if stored is None else shown_record(t, stored, reaches)

    def stored_event(event_id: str) -> ActivityEvent | None:
        stored = t.event(event_id)
        return None if stored is None else shown_event(t, stored, reaches)

    nodes: list[Node] = [n for n in dump.nodes if _place(t.node(n.id), n, key, "node")]
    for node in nodes:
        clash = t.node_by_name(node.scope, name_key(node.name))
        if clash is not None and clash.id != node.id:
            raise ImportConflictError(
                f"the knowledge store already holds a node named '{node.name}' in '{node.scope}'"
            )
    records: list[Record] = [
        r
        for r in dump.records
        if _place(stored_record(r.id), r.model_copy(update={"valid_until": None}), key, "record")
    ]
    tombstones: list[Tombstone] = [
        x for x in dump.tombstones if _place(t.tombstone(x.id), x, key, "tombstone")
    ]
    forgotten = [f for f in (_place_forgotten(t, row, key) for row in dump.forgotten) if f is not None]
    events: list[ActivityEvent] = [
        e for e in dump.events if _place(stored_event(e.id), e, key, "activity event")
    ]
    _refuse_forgotten(m, [*nodes, *records, *tombstones, *events], dump.forgotten, key)
    for node in nodes:
        t.save_node(node)
    for record in records:
        t.save_record(record)
        if record.deleted_at is None and record.trust is not TrustState.REJECTED:
            m._enqueue(record, "upsert", record.scope)
    for tombstone in tombstones:
        t.save_tombstone(tombstone)
    for value in forgotten:
        if t.forgotten(value.id) is not None:  # a stored row matching more (_place_forgotten)
            t.delete_forgotten(value.id)
        t.save_forgotten(value)
    for event in events:
        t.add_event(event)
    counts.update(
        nodes=len(nodes),
        records=len(records),
        tombstones=len(tombstones),
        forgotten=len(forgotten),
        events=len(events),
    )
    return counts
