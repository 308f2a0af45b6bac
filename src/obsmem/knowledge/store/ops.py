"""The knowledge store's mutations, written once against :class:`KnowledgeTables`.

Each public method of :class:`KnowledgeMutations` is one mutation: the adapter runs it inside
one transaction, so everything it writes (the change, its single activity event, its outbox
entries, auto-created mention nodes) commits together or not at all. Methods raise to abort;
the adapter rolls back.

Nodes created implicitly by an unresolved wikilink are part of the write that mentions them:
they are listed in that write's event (``details["created_nodes"]``) instead of logging a
second event, so every mutation still writes exactly one.

Writes are scoped like reads. Each mutation acts from a scope and refuses (with
:class:`KnowledgeNotFoundError`, saying nothing about what exists) any node or record that
scope cannot see; wikilink targets must be visible from the text's own scope, and a node a
link creates must lie within the record's ceiling. A refusal for visibility, ceiling, privilege
or a tombstone is raised through :meth:`KnowledgeMutations._refuse`, which keeps a
``write-refused`` event in :attr:`KnowledgeMutations.refusal`; the adapter rolls the write back
and then logs that event on its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from obsmem.errors import (
    CeilingExceededError,
    DescriptionTooLongError,
    InvalidInputError,
    InvalidMergeError,
    KnowledgeNotFoundError,
    NameConflictError,
    TombstonedValueError,
    UnresolvedMentionError,
)
from obsmem.knowledge.store.contract import (
    DESCRIPTION_LIMIT,
    FORGOTTEN_PLACEHOLDER,
    ActivityAction,
    ActivityEvent,
    MentionTarget,
    NewNodeMention,
    Node,
    OutboxEntry,
    Record,
    RecordDraft,
    Tombstone,
    TrustState,
    record_document_id,
)
from obsmem.knowledge.store.ids import UlidGenerator, is_ulid
from obsmem.knowledge.store.scopes import Level, Scope, check_ceiling_raise, check_within_ceiling
from obsmem.knowledge.store.speakers import hidden_from
from obsmem.knowledge.store.tables import KnowledgeTables, name_key
from obsmem.knowledge.store.values import forgotten_in, normalise_value, same_value

__all__ = ["KnowledgeMutations", "Refusal", "terminal_node", "tombstone_blocks", "tombstone_refuses"]

Refusal = Literal["not-visible", "scope", "ceiling", "privilege", "tombstoned"]

_MAX_MERGE_CHAIN = 10_000

_REFUSED_FORGOTTEN = "refused: the text holds a forgotten value"
"""A refused write's audit reason when the caller's own reason holds the forgotten value."""


def terminal_node(tables: KnowledgeTables, node_id: str) -> Node | None:
    """Follow ``merged_into`` pointers to the node that absorbed ``node_id`` (or itself)."""
    node = tables.node(node_id)
    for _ in range(_MAX_MERGE_CHAIN):
        if node is None or node.merged_into is None:
            return node
        node = tables.node(node.merged_into)
    raise InvalidMergeError(f"Node '{node_id}' has a merge chain that never ends; the store is corrupt.")


def tombstone_blocks(tombstone: Tombstone, node_id: str, scope: str, value: str) -> bool:
    """Whether ``tombstone`` hides ``value`` for ``node_id`` at ``scope`` (its scope or below).

    Reads hide exact-key matches only (:func:`~obsmem.knowledge.store.values.value_key`)."""
    return (
        tombstone.node_id == node_id
        and Scope.parse(scope).sees(tombstone.scope)
        and same_value(tombstone.value, value, near=False)
    )


def tombstone_refuses(tombstone: Tombstone, node_id: str, scope: str, value: str) -> bool:
    """Whether a write of ``value`` is refused: an exact-key match or a near-duplicate."""
    return (
        tombstone.node_id == node_id
        and Scope.parse(scope).sees(tombstone.scope)
        and same_value(tombstone.value, value, near=True)
    )


MAX_METADATA_DEPTH = 64
"""How deeply a node's or record's metadata may nest (dicts and lists); deeper is refused."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_unicode(value: str, what: str, argument: str) -> None:
    """Refuse a string holding a lone surrogate (what a surrogateescape decode of bad bytes
    leaves): no UTF-8 writer can write it, so one adapter would store it and fail on export,
    another fail on the write with a serialiser's error."""
    if _SURROGATE.search(value):
        raise InvalidInputError(f"The {what} holds a lone surrogate (not UTF-8 text); store text only.",
                                argument=argument)  # fmt: skip


def _text(value: str, what: str, argument: str | None = None) -> str:
    stripped = value.strip()
    if not stripped:
        raise InvalidInputError(f"The {what} is empty; give a non-blank {what}.")
    _check_unicode(stripped, what, argument or what.replace(" ", "_"))
    return stripped


def _check_metadata(metadata: Any) -> None:
    """Refuse metadata no adapter can keep alike: nested deeper than :data:`MAX_METADATA_DEPTH`
    (a recursion or serialiser error otherwise), a string or key holding a lone surrogate, or a
    NaN or infinity (not JSON: PostgreSQL's jsonb refuses it). Walked without recursion."""
    stack: list[tuple[Any, int]] = [(metadata, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_unicode(item, "metadata", "metadata")
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInputError(f"The metadata holds {item}, which JSON cannot hold.", argument="metadata")
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_METADATA_DEPTH:
                raise InvalidInputError(f"The metadata is nested more than {MAX_METADATA_DEPTH} levels deep.",
                                        argument="metadata")  # fmt: skip
            children = [*item.keys(), *item.values()] if isinstance(item, Mapping) else list(item)
            stack.extend((child, depth + 1) for child in children)


def _check_description(description: str | None) -> None:
    if description is not None and len(description) > DESCRIPTION_LIMIT:
        raise DescriptionTooLongError(len(description), DESCRIPTION_LIMIT)
    if description is not None:
        _check_unicode(description, "description", "description")


class KnowledgeMutations:
    """One transaction's worth of writes; ``now`` is fixed for the whole transaction."""

    def __init__(self, tables: KnowledgeTables, ids: UlidGenerator, now: datetime) -> None:
        self.t = tables
        self.ids = ids
        self.now = now
        self._created_nodes: list[str] = []
        self.refusal: ActivityEvent | None = None

    def _refuse(
        self,
        error: Exception,
        refusal: Refusal,
        operation: str,
        subject_type: Literal["node", "record", "tombstone"],
        subject_id: str,
        acting_scope: str,
        actor: str,
        reason: str,
    ) -> Exception:
        """Keep the ``write-refused`` event for ``error`` and return the error to raise."""
        self.refusal = ActivityEvent(
            id=self.ids.new(),
            action=ActivityAction.WRITE_REFUSED,
            subject_type=subject_type,
            subject_id=subject_id,
            scope=Scope.parse(acting_scope).key,
            actor=_text(actor, "actor"),
            reason=_text(reason, "reason"),
            created_at=self.now,
            details={"operation": operation, "refusal": refusal, "error": str(error)},
        )
        return error

    # -- shared steps --------------------------------------------------------------------------
    def _event(
        self,
        action: ActivityAction,
        subject_type: Literal["node", "record", "tombstone", "scope"],
        subject_id: str,
        scope: str,
        actor: str,
        reason: str,
        *,
        source_thread_id: str | None = None,
        details: Mapping[str, Any] | None = None,
        event_id: str | None = None,
    ) -> None:
        payload = dict(details or {})
        if self._created_nodes:
            payload["created_nodes"] = list(self._created_nodes)
        self.t.add_event(
            ActivityEvent(
                id=event_id or self.ids.new(),
                action=action,
                subject_type=subject_type,
                subject_id=subject_id,
                scope=scope,
                actor=_text(actor, "actor"),
                reason=_text(reason, "reason"),
                source_thread_id=source_thread_id,
                created_at=self.now,
                details=payload,
            )
        )

    def _enqueue(self, record: Record, operation: Literal["upsert", "delete"], scope: str) -> None:
        document_id = record_document_id(record.id)
        key = f"{document_id}:{operation}:{record.revision}"
        if self.t.outbox_key_exists(key):
            return
        self.t.save_outbox(
            OutboxEntry(
                id=self.ids.new(),
                idempotency_key=key,
                document_id=document_id,
                record_id=record.id,
                operation=operation,
                scope=scope,
                available_at=self.now,
                created_at=self.now,
            )
        )

    def _require_node(self, node_id: str) -> Node:
        node = terminal_node(self.t, node_id)
        if node is None:
            raise KnowledgeNotFoundError(f"Knowledge node '{node_id}' does not exist.")
        return node

    def _visible_node(self, node_id: str, scope: str, operation: str, actor: str, reason: str) -> Node:
        """The node (after merges) if ``scope`` sees it; otherwise a refusal."""
        node = terminal_node(self.t, node_id)
        return self._check_node_visible(node, node_id, scope, operation, actor, reason)

    def _check_node_visible(
        self, node: Node | None, node_id: str, scope: str, operation: str, actor: str, reason: str
    ) -> Node:
        if node is None or not Scope.parse(scope).sees(node.scope):
            raise self._refuse(
                KnowledgeNotFoundError(
                    f"Knowledge node '{node_id}' is not visible from scope '{scope}'; check the id "
                    "and act from a scope that contains the node."
                ),
                "not-visible",
                operation,
                "node",
                node_id,
                scope,
                actor,
                reason,
            )
        return node

    def _visible_record(self, record_id: str, scope: str, operation: str, actor: str, reason: str) -> Record:
        record = self.t.record(record_id)
        acting = Scope.parse(scope)
        if record is None or not acting.sees(record.scope) or hidden_from(record, acting.key):
            raise self._refuse(
                KnowledgeNotFoundError(
                    f"Knowledge record '{record_id}' is not visible from scope '{scope}'; check the id "
                    "and act from a scope that contains the record."
                ),
                "not-visible",
                operation,
                "record",
                record_id,
                scope,
                actor,
                reason,
            )
        return record

    def _check_reach(
        self, record: Record, target: Scope, operation: str, acting: str, actor: str, reason: str
    ) -> None:
        """A record moved to ``target`` must still see its node and every node it links to."""
        for node_id in (record.node_id, *record.mentions):
            node = terminal_node(self.t, node_id)
            if node is None or not target.sees(node.scope):
                raise self._refuse(
                    InvalidInputError(
                        f"Cannot move record '{record.id}' to '{target.key}': its node or a node it links "
                        "to is not visible there. Move the node first, or keep the record narrower."
                    ),
                    "scope",
                    operation,
                    "record",
                    record.id,
                    acting,
                    actor,
                    reason,
                )

    def _check_ceiling(
        self,
        target: Scope,
        ceiling: Level,
        operation: str,
        record_id: str,
        acting: str,
        actor: str,
        reason: str,
    ) -> None:
        try:
            check_within_ceiling(target, ceiling)
        except CeilingExceededError as exc:
            raise self._refuse(
                exc, "ceiling", operation, "record", record_id, acting, actor, reason
            ) from None

    def _mentions(
        self,
        targets: Sequence[MentionTarget],
        where: str,
        ceiling: Level | None,
        operation: str,
        subject: tuple[Literal["node", "record"], str],
        actor: str,
        reason: str,
    ) -> tuple[str, ...]:
        """Turn resolved wikilinks into node ids, creating the unresolved ones in this write.

        Every target must be visible from ``where`` (the scope of the text that links), and a
        node created here must lie within ``ceiling``, so a link never carries a name wider
        than the text it came from may go.
        """
        home = Scope.parse(where)
        node_ids: list[str] = []
        for target in targets:
            if isinstance(target, NewNodeMention):
                parsed = Scope.parse(target.scope)
                scope = parsed.key
                if not home.sees(parsed):
                    raise self._refuse(
                        KnowledgeNotFoundError(
                            f"A wikilink in '{home.key}' cannot create node '{target.name}' in "
                            f"'{scope}': that scope is not on its chain."
                        ),
                        "not-visible",
                        operation,
                        subject[0],
                        subject[1],
                        home.key,
                        actor,
                        reason,
                    )
                if ceiling is not None and parsed.level < ceiling:
                    raise self._refuse(
                        CeilingExceededError(
                            f"A wikilink cannot create node '{target.name}' in '{scope}': the record's "
                            f"ceiling is {ceiling.label}, so the nodes it creates stay at {ceiling.label} "
                            "level or narrower."
                        ),
                        "ceiling",
                        operation,
                        subject[0],
                        subject[1],
                        home.key,
                        actor,
                        reason,
                    )
                existing = self.t.node_by_name(scope, name_key(target.name))
                node = terminal_node(self.t, existing.id) if existing else None
                if node is None:
                    node = self._new_node(target.name, target.kind, scope, None, None, {}, (), None)
                    self._created_nodes.append(node.id)
            else:
                found = terminal_node(self.t, target)
                if found is None:
                    raise UnresolvedMentionError(
                        f"Wikilink target node '{target}' no longer exists; resolve the link again."
                    )
                node = self._check_node_visible(found, target, home.key, operation, actor, reason)
            if node.id not in node_ids:
                node_ids.append(node.id)
        return tuple(node_ids)

    def _new_node(
        self,
        name: str,
        kind: str,
        scope: str,
        content: str | None,
        description: str | None,
        metadata: Mapping[str, Any],
        mentions: tuple[str, ...],
        node_id: str | None,
    ) -> Node:
        if node_id is not None and self.t.node(node_id) is not None:
            raise NameConflictError(f"A knowledge node with id '{node_id}' already exists; pick another id.")
        node = Node(
            id=node_id or self.ids.new(),
            name=_text(name, "node name"),
            kind=_text(kind, "node kind"),
            content=content,
            description=description,
            scope=scope,
            mentions=mentions,
            metadata=dict(metadata),
            created_at=self.now,
            updated_at=self.now,
        )
        self.t.save_node(node)
        return node

    def _check_tombstones(
        self,
        node_id: str,
        scope: str,
        text: str,
        operation: str,
        subject: tuple[Literal["node", "record"], str],
        actor: str,
        reason: str,
    ) -> None:
        _check_unicode(text, "text", "text")  # an edit's new text too
        value = normalise_value(text)
        for tombstone in self.t.tombstones_for(node_id):
            if tombstone_refuses(tombstone, node_id, scope, value):
                raise self._refuse(
                    TombstonedValueError(node_id, tombstone.scope, value),
                    "tombstoned",
                    operation,
                    subject[0],
                    subject[1],
                    scope,
                    actor,
                    reason,
                )
        self._check_forgotten(node_id, scope, (text,), operation, subject, actor, reason)

    def _check_forgotten(
        self,
        node_id: str,
        scope: str,
        texts: Sequence[str | None],
        operation: str,
        subject: tuple[Literal["node", "record"], str],
        actor: str,
        reason: str,
    ) -> None:
        """Refuse texts holding a value forgotten on ``scope``'s chain; neither the error nor
        its audit event shows the value (:data:`FORGOTTEN_PLACEHOLDER` stands in for it). The
        caller's reason and actor go into that event only when they do not hold it either (a
        capture's reason quotes what the user said): otherwise the reason names why the write
        was refused and the actor is the placeholder."""
        forgotten = self.t.forgotten_in(Scope.parse(scope).visible_keys())
        if not forgotten:
            return
        digests = [(entry.digest, entry.length) for entry in forgotten]
        for text in texts:
            if not text:
                continue
            for entry in forgotten:
                if forgotten_in(text, [(entry.digest, entry.length)]):
                    raise self._refuse(
                        TombstonedValueError(node_id, entry.scope, FORGOTTEN_PLACEHOLDER),
                        "tombstoned",
                        operation,
                        subject[0],
                        subject[1],
                        scope,
                        FORGOTTEN_PLACEHOLDER if forgotten_in(actor, digests) else actor,
                        _REFUSED_FORGOTTEN if forgotten_in(reason, digests) else reason,
                    )

    def _tombstone(self, node_id: str, scope: str, text: str, actor: str, reason: str) -> Tombstone:
        value = normalise_value(text)
        if not value:
            raise InvalidInputError("A tombstone needs a non-blank value.")
        for existing in self.t.tombstones_for(node_id):
            if existing.scope == scope and same_value(existing.value, value, near=False):
                return existing
        tombstone = Tombstone(
            id=self.ids.new(),
            node_id=node_id,
            scope=scope,
            value=value,
            actor=actor,
            reason=reason,
            created_at=self.now,
        )
        self.t.save_tombstone(tombstone)
        return tombstone

    # -- nodes ---------------------------------------------------------------------------------
    def create_node(
        self,
        name: str,
        kind: str,
        scope: str,
        *,
        actor: str,
        reason: str,
        content: str | None,
        description: str | None,
        metadata: Mapping[str, Any] | None,
        mentions: Sequence[MentionTarget],
        node_id: str | None,
    ) -> Node:
        """Create a node, or return the one already named so in that scope (idempotent)."""
        parsed = Scope.parse(scope)
        _check_description(description)
        _check_metadata(metadata or {})
        if content is not None:
            _check_unicode(content, "node content", "content")
        existing = self.t.node_by_name(parsed.key, name_key(_text(name, "node name", "name")))
        if existing is not None:
            terminal = terminal_node(self.t, existing.id)
            if terminal is None or not parsed.sees(terminal.scope):
                raise NameConflictError(
                    f"Node '{name}' in '{parsed.key}' was merged into a node not visible from that scope; "
                    "use another name or read the merged node from a broader scope."
                )
            return terminal
        self._check_forgotten(
            node_id or "(new node)",
            parsed.key,
            (name, kind, content, description),
            "create_node",
            ("node", node_id or "(new node)"),
            actor,
            reason,
        )
        links = self._mentions(
            mentions, parsed.key, None, "create_node", ("node", node_id or name), actor, reason
        )
        node = self._new_node(name, kind, parsed.key, content, description, metadata or {}, links, node_id)
        self._event(ActivityAction.NODE_CREATED, "node", node.id, node.scope, actor, reason)
        return node

    def update_node(
        self,
        node_id: str,
        expected_version: int,
        *,
        scope: str,
        actor: str,
        reason: str,
        name: str | None,
        kind: str | None,
        content: str | None,
        description: str | None,
        mentions: Sequence[MentionTarget] | None,
    ) -> Node | None:
        """Compare-and-set on ``version``, acting from ``scope`` (which must see the node).

        ``description=""`` clears it explicitly (and a cleared target then keeps its empty
        description on a merge); ``None`` leaves it unchanged.
        """
        node = self._check_node_visible(self.t.node(node_id), node_id, scope, "update_node", actor, reason)
        if node.merged_into is not None:
            raise InvalidMergeError(
                f"Node '{node_id}' was merged into '{node.merged_into}'; update that node instead."
            )
        if node.version != expected_version:
            return None
        _check_description(description)
        if content is not None:
            _check_unicode(content, "node content", "content")
        self._check_forgotten(
            node.id,
            node.scope,
            (name, kind, content, description),
            "update_node",
            ("node", node.id),
            actor,
            reason,
        )
        changes: dict[str, Any] = {}
        if name is not None and name.strip() != node.name:
            clash = self.t.node_by_name(node.scope, name_key(name))
            if clash is not None and clash.id != node.id:
                raise NameConflictError(f"Another node is already named '{name}' in scope '{node.scope}'.")
            changes["name"] = _text(name, "node name")
        if kind is not None:
            changes["kind"] = _text(kind, "node kind")
        if content is not None:
            changes["content"] = content
        if description is not None:
            changes["description"] = description  # "" is an explicit clear
        if mentions is not None:
            changes["mentions"] = self._mentions(
                mentions, node.scope, None, "update_node", ("node", node.id), actor, reason
            )
        updated = node.model_copy(update={**changes, "version": node.version + 1, "updated_at": self.now})
        self.t.save_node(updated)
        if "name" in changes:  # record documents embed the node name: re-index them
            for record in self.t.records_about(node.id):
                self._bump_and_reindex(record)
        self._event(
            ActivityAction.NODE_UPDATED,
            "node",
            node.id,
            node.scope,
            actor,
            reason,
            details={"fields": sorted(changes)},
        )
        return updated

    def _bump_and_reindex(self, record: Record, **update: Any) -> Record:
        bumped = record.model_copy(update={**update, "revision": record.revision + 1})
        self.t.save_record(bumped)
        if bumped.deleted_at is None and bumped.trust is not TrustState.REJECTED:
            self._enqueue(bumped, "upsert", bumped.scope)
        return bumped

    def merge_nodes(
        self, source_id: str, target_id: str, source_version: int, *, scope: str, actor: str, reason: str
    ) -> Node | None:
        """Fold ``source`` into ``target``: its records, mentions and tombstones move over.

        Both must be visible from ``scope``. The source's description is adopted only from a
        node of the target's own scope: adopting it from a narrower one would show a
        thread-private text to the target's whole audience.
        """
        source = self._check_node_visible(
            self.t.node(source_id), source_id, scope, "merge_nodes", actor, reason
        )
        if source.merged_into is not None:
            raise InvalidMergeError(f"Node '{source_id}' was already merged into '{source.merged_into}'.")
        if source.version != source_version:
            return None
        target = self._visible_node(target_id, scope, "merge_nodes", actor, reason)
        if target.id == source.id:
            raise InvalidMergeError(
                f"Cannot merge node '{source_id}' into '{target_id}': that is the same node or would "
                "make a merge cycle."
            )
        if not Scope.parse(source.scope).sees(target.scope):
            raise InvalidMergeError(
                f"Cannot merge node '{source_id}' ({source.scope}) into '{target.id}' ({target.scope}): the "
                "target must be in the same scope or a broader one on the same chain."
            )
        for record in self.t.records_about(source.id):
            self._bump_and_reindex(record, node_id=target.id)
        for record in self.t.records_mentioning(source.id):
            record = self.t.record(record.id) or record
            self.t.save_record(
                record.model_copy(update={"mentions": _swap(record.mentions, source.id, target.id)})
            )
        for node in self.t.nodes_mentioning(source.id):
            self.t.save_node(node.model_copy(update={"mentions": _swap(node.mentions, source.id, target.id)}))
        for tombstone in self.t.tombstones_for(source.id):
            self.t.save_tombstone(tombstone.model_copy(update={"node_id": target.id}))
        target = self._require_node(target.id)
        adopted = (
            target.description is None and source.description is not None and target.scope == source.scope
        )
        if adopted:
            target = target.model_copy(
                update={
                    "description": source.description,
                    "version": target.version + 1,
                    "updated_at": self.now,
                }
            )
            self.t.save_node(target)
        self.t.save_node(
            source.model_copy(
                update={"merged_into": target.id, "version": source.version + 1, "updated_at": self.now}
            )
        )
        self._event(
            ActivityAction.NODE_MERGED,
            "node",
            source.id,
            source.scope,
            actor,
            reason,
            details={"target": target.id, "adopted_description": adopted},
        )
        return target

    # -- records -------------------------------------------------------------------------------
    def append_record(self, draft: RecordDraft, *, actor: str, reason: str) -> Record:
        parsed = Scope.parse(draft.scope)
        subject = ("record", draft.record_id or draft.node_id)
        self._check_ceiling(parsed, draft.max_scope, "append_record", subject[1], parsed.key, actor, reason)
        node = self._visible_node(draft.node_id, parsed.key, "append_record", actor, reason)
        if draft.trust is TrustState.REJECTED:
            raise InvalidInputError(
                "A record cannot be appended as rejected; append a candidate and reject it."
            )
        body = _text(draft.text, "record text", "text")
        _check_metadata(draft.metadata or {})
        if draft.attribute is not None:
            _check_unicode(draft.attribute, "attribute", "attribute")
        for argument, value in (("attribute", draft.attribute), ("source_thread_id", draft.source_thread_id)):
            if value is not None and "\x00" in value:  # reads compare them: PostgreSQL cannot take a NUL
                raise InvalidInputError(f"The {argument} holds a NUL character; give one without.",
                                        argument=argument)  # fmt: skip
        self._check_tombstones(
            node.id, parsed.key, body, "append_record", ("record", subject[1]), actor, reason
        )
        if draft.record_id is not None and not is_ulid(draft.record_id):
            raise InvalidInputError(  # the listings page by record id: one of another shape could not
                f"Invalid record_id: {draft.record_id[:40]!r} is not a ULID "
                "(26 characters, as the store issues).",
                argument="record_id",
            )
        if draft.record_id is not None and self.t.record(draft.record_id) is not None:
            raise InvalidInputError(f"A knowledge record with id '{draft.record_id}' already exists.")
        record = Record(
            id=draft.record_id or self.ids.new(),
            node_id=node.id,
            text=body,
            scope=parsed.key,
            source_thread_id=draft.source_thread_id,
            captured_at=self.now,
            when=draft.when,
            max_scope=draft.max_scope,
            attribute=draft.attribute.strip().casefold() if draft.attribute else None,
            trust=draft.trust,
            metadata={**(draft.metadata or {}), "reason": reason},
            mentions=self._mentions(
                draft.mentions,
                parsed.key,
                draft.max_scope,
                "append_record",
                ("record", subject[1]),
                actor,
                reason,
            ),
        )
        self.t.save_record(record)
        self._enqueue(record, "upsert", record.scope)
        self._event(
            ActivityAction.RECORD_CREATED,
            "record",
            record.id,
            record.scope,
            actor,
            reason,
            source_thread_id=draft.source_thread_id,
            details={"node": node.id, "trust": draft.trust.value},
        )
        return record

    def remove_record(
        self, record_id: str, scope: str, *, actor: str, reason: str, tombstone: bool,
        superseded_by: str | None = None, reason_within: tuple[str, str] | None = None,
    ) -> Record:
        """Soft delete (idempotent: a second removal writes nothing)."""
        record = self._visible_record(record_id, scope, "remove_record", actor, reason)
        if record.deleted_at is not None:
            return record
        within: tuple[str, str] | None = None
        if reason_within is not None:
            narrower, full = reason_within
            try:
                narrow: Scope | None = Scope.parse(narrower)
            except InvalidInputError:
                narrow = None
            if narrow is None or narrow.key == record.scope or not narrow.sees(record.scope) \
                    or not Scope.parse(scope).sees(narrow):
                raise InvalidInputError(
                    f"reason_within names '{narrower}': it must be a scope below the record's "
                    f"('{record.scope}') on the chain of '{scope}'.", argument="reason_within"
                )
            within = (narrow.key, full)
        if superseded_by is not None:
            successor = self.t.record(superseded_by)
            if (successor is None or successor.node_id != record.node_id or successor.id == record.id
                    or not Scope.parse(scope).sees(successor.scope)):
                raise InvalidInputError(
                    f"Record '{superseded_by}' cannot supersede '{record_id}': it must be another record "
                    f"about the same node, visible from '{scope}'."
                )
        removed = record.model_copy(
            update={"deleted_at": self.now, "deleted_by": actor, "revision": record.revision + 1,
                    "superseded_by": superseded_by}
        )
        self.t.save_record(removed)
        self._enqueue(removed, "delete", removed.scope)
        details: dict[str, Any] = {}
        if tombstone:
            details["tombstone"] = self._tombstone(
                record.node_id, record.scope, record.text, actor, reason
            ).id
        if within is not None:
            # The full reason, which may quote the narrower scope's text, is logged there only;
            # the record's scope, read by every thread of it, gets ``reason``, which names none.
            full = self.ids.new()
            self._event(ActivityAction.RECORD_DELETED, "record", record.id, within[0], actor, within[1],
                        details={**details, "logged_at": record.scope}, event_id=full)
            details["reason_event"] = full
        self._event(
            ActivityAction.RECORD_DELETED, "record", record.id, record.scope, actor, reason, details=details
        )
        return removed

    def restore_record(self, record_id: str, scope: str, *, actor: str, reason: str) -> Record:
        record = self._visible_record(record_id, scope, "restore_record", actor, reason)
        if record.deleted_at is None:
            return record
        self._check_tombstones(
            record.node_id, record.scope, record.text, "restore_record", ("record", record.id), actor, reason
        )
        removed = (*record.removed_before, (record.deleted_at, self.now))  # reads as known then leave it out
        restored = self._bump_and_reindex(record, deleted_at=None, deleted_by=None, superseded_by=None,
                                          removed_before=removed)
        self._event(ActivityAction.RECORD_RESTORED, "record", record.id, record.scope, actor, reason)
        return restored

    def rescope_record(
        self, record_id: str, scope: str, new_scope: str, *, actor: str, reason: str
    ) -> Record:
        """Move a record along the actor's chain; the index follows (delete old, upsert new)."""
        acting = Scope.parse(scope)
        record = self._visible_record(record_id, scope, "rescope_record", actor, reason)
        target = Scope.parse(new_scope)
        if not acting.sees(target):
            raise self._refuse(
                InvalidInputError(
                    f"Cannot move record '{record_id}' to '{target.key}': from '{acting.key}' a record can "
                    "only move within its own scope chain."
                ),
                "scope",
                "rescope_record",
                "record",
                record.id,
                acting.key,
                actor,
                reason,
            )
        self._check_ceiling(target, record.max_scope, "rescope_record", record.id, acting.key, actor, reason)
        if target.key == record.scope:
            return record
        self._check_reach(record, target, "rescope_record", acting.key, actor, reason)
        self._check_tombstones(
            record.node_id, target.key, record.text, "rescope_record", ("record", record.id), actor, reason
        )
        moved = record.model_copy(update={"scope": target.key, "revision": record.revision + 1})
        self.t.save_record(moved)
        self._enqueue(moved, "delete", record.scope)
        if moved.deleted_at is None and moved.trust is not TrustState.REJECTED:
            self._enqueue(moved, "upsert", moved.scope)
        self._event(
            ActivityAction.RECORD_RESCOPED,
            "record",
            record.id,
            moved.scope,
            actor,
            reason,
            details={"from": record.scope, "to": moved.scope},
        )
        return moved

    def raise_ceiling(
        self, record_id: str, scope: str, ceiling: Level, *, actor: str, reason: str, privileged: bool
    ) -> Record:
        """Broaden ``max_scope``; logged as ``record-rescoped`` with ``details["ceiling"]``.

        Privileged: refused unless the caller says ``privileged=True``, because any scope that
        sees a record could otherwise lift its ceiling and then promote it.
        """
        record = self._visible_record(record_id, scope, "raise_ceiling", actor, reason)
        if not privileged and ceiling < record.max_scope:
            raise self._refuse(
                CeilingExceededError(
                    f"Raising the ceiling of record '{record_id}' to {ceiling.label} is a privileged "
                    "operation; call raise_ceiling(..., privileged=True) from an administrative path, "
                    "never from one an agent or user controls."
                ),
                "privilege",
                "raise_ceiling",
                "record",
                record.id,
                scope,
                actor,
                reason,
            )
        check_ceiling_raise(record.max_scope, ceiling)
        if ceiling == record.max_scope:
            return record
        raised = record.model_copy(update={"max_scope": ceiling})
        self.t.save_record(raised)
        self._event(
            ActivityAction.RECORD_RESCOPED,
            "record",
            record.id,
            record.scope,
            actor,
            reason,
            details={"ceiling": {"from": record.max_scope.label, "to": ceiling.label}},
        )
        return raised

    def set_trust(
        self, record_id: str, scope: str, trust: TrustState, *, actor: str, reason: str, tombstone: bool
    ) -> Record:
        """Review decision: a candidate becomes verified or rejected (once)."""
        record = self._visible_record(record_id, scope, "set_trust", actor, reason)
        if trust is TrustState.CANDIDATE:
            raise InvalidInputError(
                "A record cannot be moved back to candidate; append a new candidate instead."
            )
        if record.trust is trust:
            return record
        if record.trust is not TrustState.CANDIDATE:
            raise InvalidInputError(
                f"Record '{record_id}' is already {record.trust.value}; only candidates are reviewed. "
                "Remove it (optionally with a tombstone) instead."
            )
        changed = record.model_copy(
            update={"trust": trust, "trust_changed_at": self.now, "revision": record.revision + 1}
        )
        self.t.save_record(changed)
        details: dict[str, Any] = {}
        if trust is TrustState.REJECTED:
            self._enqueue(changed, "delete", changed.scope)
            if tombstone:
                details["tombstone"] = self._tombstone(
                    record.node_id, record.scope, record.text, actor, reason
                ).id
        action = (
            ActivityAction.RECORD_VERIFIED if trust is TrustState.VERIFIED else ActivityAction.RECORD_REJECTED
        )
        self._event(action, "record", record.id, record.scope, actor, reason, details=details)
        return changed

    def add_tombstone(self, node_id: str, scope: str, value: str, *, actor: str, reason: str) -> Tombstone:
        key = Scope.parse(scope).key
        node = self._visible_node(node_id, key, "add_tombstone", actor, reason)
        before = {t.id for t in self.t.tombstones_for(node.id)}
        tombstone = self._tombstone(node.id, key, value, actor, reason)
        if tombstone.id not in before:
            self._event(
                ActivityAction.TOMBSTONE_CREATED,
                "tombstone",
                tombstone.id,
                key,
                actor,
                reason,
                details={"node": node.id, "value": tombstone.value},
            )
        return tombstone


def _swap(node_ids: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    result: list[str] = []
    for node_id in node_ids:
        replacement = new if node_id == old else node_id
        if replacement not in result:
            result.append(replacement)
    return tuple(result)
