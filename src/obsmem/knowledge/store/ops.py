"""The knowledge store's mutations, written once against :class:`KnowledgeTables`.

Each public method of :class:`KnowledgeMutations` is one mutation: the adapter runs it inside
one transaction, so everything it writes (the change, its single activity event, its outbox
entries, auto-created mention nodes) commits together or not at all. Methods raise to abort;
the adapter rolls back.

Nodes created implicitly by an unresolved wikilink are part of the write that mentions them:
they are listed in that write's event (``details["created_nodes"]``) instead of logging a
second event, so every mutation still writes exactly one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from obsmem.errors import (
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
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.scopes import Level, Scope, check_ceiling_raise, check_within_ceiling
from obsmem.knowledge.store.tables import KnowledgeTables, name_key
from obsmem.knowledge.store.values import normalise_value

__all__ = ["KnowledgeMutations", "terminal_node", "tombstone_blocks"]

_MAX_MERGE_CHAIN = 10_000


def terminal_node(tables: KnowledgeTables, node_id: str) -> Node | None:
    """Follow ``merged_into`` pointers to the node that absorbed ``node_id`` (or itself)."""
    node = tables.node(node_id)
    for _ in range(_MAX_MERGE_CHAIN):
        if node is None or node.merged_into is None:
            return node
        node = tables.node(node.merged_into)
    raise InvalidMergeError(f"Node '{node_id}' has a merge chain that never ends; the store is corrupt.")


def tombstone_blocks(tombstone: Tombstone, node_id: str, scope: str, value: str) -> bool:
    """Whether ``tombstone`` forbids ``value`` for ``node_id`` at ``scope`` (its scope or below)."""
    return (
        tombstone.node_id == node_id and tombstone.value == value and Scope.parse(scope).sees(tombstone.scope)
    )


def _text(value: str, what: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise InvalidInputError(f"The {what} is empty; give a non-blank {what}.")
    return stripped


def _check_description(description: str | None) -> None:
    if description is not None and len(description) > DESCRIPTION_LIMIT:
        raise DescriptionTooLongError(len(description), DESCRIPTION_LIMIT)


class KnowledgeMutations:
    """One transaction's worth of writes; ``now`` is fixed for the whole transaction."""

    def __init__(self, tables: KnowledgeTables, ids: UlidGenerator, now: datetime) -> None:
        self.t = tables
        self.ids = ids
        self.now = now
        self._created_nodes: list[str] = []

    # -- shared steps --------------------------------------------------------------------------
    def _event(
        self,
        action: ActivityAction,
        subject_type: Literal["node", "record", "tombstone"],
        subject_id: str,
        scope: str,
        actor: str,
        reason: str,
        *,
        source_thread_id: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        payload = dict(details or {})
        if self._created_nodes:
            payload["created_nodes"] = list(self._created_nodes)
        self.t.add_event(
            ActivityEvent(
                id=self.ids.new(),
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

    def _visible_record(self, record_id: str, scope: str) -> Record:
        record = self.t.record(record_id)
        if record is None or not Scope.parse(scope).sees(record.scope):
            raise KnowledgeNotFoundError(
                f"Knowledge record '{record_id}' is not visible from scope '{scope}'; check the id "
                "and act from a scope that contains the record."
            )
        return record

    def _mentions(self, targets: Sequence[MentionTarget]) -> tuple[str, ...]:
        """Turn resolved wikilinks into node ids, creating the unresolved ones in this write."""
        node_ids: list[str] = []
        for target in targets:
            if isinstance(target, NewNodeMention):
                scope = Scope.parse(target.scope).key
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
                node = found
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

    def _check_tombstones(self, node_id: str, scope: str, text: str) -> None:
        value = normalise_value(text)
        for tombstone in self.t.tombstones_for(node_id):
            if tombstone_blocks(tombstone, node_id, scope, value):
                raise TombstonedValueError(node_id, tombstone.scope, value)

    def _tombstone(self, node_id: str, scope: str, text: str, actor: str, reason: str) -> Tombstone:
        value = normalise_value(text)
        if not value:
            raise InvalidInputError("A tombstone needs a non-blank value.")
        for existing in self.t.tombstones_for(node_id):
            if existing.scope == scope and existing.value == value:
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
        existing = self.t.node_by_name(parsed.key, name_key(_text(name, "node name")))
        if existing is not None:
            terminal = terminal_node(self.t, existing.id)
            if terminal is None or not parsed.sees(terminal.scope):
                raise NameConflictError(
                    f"Node '{name}' in '{parsed.key}' was merged into a node not visible from that scope; "
                    "use another name or read the merged node from a broader scope."
                )
            return terminal
        node = self._new_node(
            name, kind, parsed.key, content, description, metadata or {}, self._mentions(mentions), node_id
        )
        self._event(ActivityAction.NODE_CREATED, "node", node.id, node.scope, actor, reason)
        return node

    def update_node(
        self,
        node_id: str,
        expected_version: int,
        *,
        actor: str,
        reason: str,
        name: str | None,
        kind: str | None,
        content: str | None,
        description: str | None,
        mentions: Sequence[MentionTarget] | None,
    ) -> Node | None:
        """Compare-and-set on ``version``.

        ``description=""`` clears it explicitly (and a cleared target then keeps its empty
        description on a merge); ``None`` leaves it unchanged.
        """
        node = self.t.node(node_id)
        if node is None:
            raise KnowledgeNotFoundError(f"Knowledge node '{node_id}' does not exist.")
        if node.merged_into is not None:
            raise InvalidMergeError(
                f"Node '{node_id}' was merged into '{node.merged_into}'; update that node instead."
            )
        if node.version != expected_version:
            return None
        _check_description(description)
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
            changes["mentions"] = self._mentions(mentions)
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
        self, source_id: str, target_id: str, source_version: int, *, actor: str, reason: str
    ) -> Node | None:
        """Fold ``source`` into ``target``: its records, mentions and tombstones move over."""
        source = self.t.node(source_id)
        if source is None:
            raise KnowledgeNotFoundError(f"Knowledge node '{source_id}' does not exist.")
        if source.merged_into is not None:
            raise InvalidMergeError(f"Node '{source_id}' was already merged into '{source.merged_into}'.")
        if source.version != source_version:
            return None
        target = self._require_node(target_id)
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
        adopted = target.description is None and source.description is not None
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
        node = self._require_node(draft.node_id)
        if Scope.parse(node.scope).org != parsed.org:
            raise InvalidInputError(
                f"Node '{node.id}' belongs to another organisation than scope '{parsed.key}'."
            )
        check_within_ceiling(parsed, draft.max_scope)
        if draft.trust is TrustState.REJECTED:
            raise InvalidInputError(
                "A record cannot be appended as rejected; append a candidate and reject it."
            )
        body = _text(draft.text, "record text")
        self._check_tombstones(node.id, parsed.key, body)
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
            mentions=self._mentions(draft.mentions),
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
        self, record_id: str, scope: str, *, actor: str, reason: str, tombstone: bool
    ) -> Record:
        """Soft delete (idempotent: a second removal writes nothing)."""
        record = self._visible_record(record_id, scope)
        if record.deleted_at is not None:
            return record
        removed = record.model_copy(
            update={"deleted_at": self.now, "deleted_by": actor, "revision": record.revision + 1}
        )
        self.t.save_record(removed)
        self._enqueue(removed, "delete", removed.scope)
        details: dict[str, Any] = {}
        if tombstone:
            details["tombstone"] = self._tombstone(
                record.node_id, record.scope, record.text, actor, reason
            ).id
        self._event(
            ActivityAction.RECORD_DELETED, "record", record.id, record.scope, actor, reason, details=details
        )
        return removed

    def restore_record(self, record_id: str, scope: str, *, actor: str, reason: str) -> Record:
        record = self._visible_record(record_id, scope)
        if record.deleted_at is None:
            return record
        self._check_tombstones(record.node_id, record.scope, record.text)
        restored = self._bump_and_reindex(record, deleted_at=None, deleted_by=None)
        self._event(ActivityAction.RECORD_RESTORED, "record", record.id, record.scope, actor, reason)
        return restored

    def rescope_record(
        self, record_id: str, scope: str, new_scope: str, *, actor: str, reason: str
    ) -> Record:
        """Move a record along the actor's chain; the index follows (delete old, upsert new)."""
        acting = Scope.parse(scope)
        record = self._visible_record(record_id, scope)
        target = Scope.parse(new_scope)
        if not acting.sees(target):
            raise InvalidInputError(
                f"Cannot move record '{record_id}' to '{target.key}': from '{acting.key}' a record can only "
                "move within its own scope chain."
            )
        check_within_ceiling(target, record.max_scope)
        if target.key == record.scope:
            return record
        self._check_tombstones(record.node_id, target.key, record.text)
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

    def raise_ceiling(self, record_id: str, scope: str, ceiling: Level, *, actor: str, reason: str) -> Record:
        """Broaden ``max_scope``; logged as ``record-rescoped`` with ``details["ceiling"]``."""
        record = self._visible_record(record_id, scope)
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
        record = self._visible_record(record_id, scope)
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
        node = self._require_node(node_id)
        key = Scope.parse(scope).key
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
