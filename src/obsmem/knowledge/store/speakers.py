"""Speaker facts a version before 15fe659 filed at org scope, whose owner is unknown.

Before 15fe659, capture with ``node_level="org"`` and ``record_level="org"`` made the speaker's
node (the ``User`` node) one node for the whole org and filed what each user said about
themselves under it at org scope: alice's "my phone number is …" became an org record, seen by
every user of the org, and its ``record-created`` event's reason quoted it. Capture no longer
writes such a record (the speaker's records are never broader than their resource).

Rows already written cannot be moved to their owner's scope by a migration: the knowledge store
holds the record's source thread id, not its resource, and the thread lives in the message store
(often another file or database, and a deleted thread's id may be reused by another user). So the
upgrade (:func:`mark_unowned_speaker_facts`, a numbered knowledge migration) *marks* them
(``metadata[UNOWNED]`` on the record, ``details[UNOWNED]`` on its events), and every read shows a
marked row that is still at org scope only to the org itself (:func:`hidden_from`): not to a
resource or thread of it, nor in their exports, audit log, search or review queue, and no write
from below reaches it. An administrator acting at the org sees them and may rescope each to its
owner's resource (then the usual rules apply), or erase it; forgetting the value reaches it.

What identifies one, exactly: a record at org scope, written by capture (``metadata.agent ==
"capture"``), about an org-scope node named ``User`` (capture's default speaker node). Capture
writes no such record since 15fe659; a person's own record there (no ``agent``) is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from obsmem.knowledge.store.contract import ActivityEvent, Record
from obsmem.knowledge.store.tables import name_key

__all__ = ["UNOWNED", "hidden_from", "mark_unowned_speaker_facts"]

UNOWNED = "unowned_speaker_fact"
"""The mark: on a record's ``metadata``, and on the ``details`` of the events about it."""

_SPEAKER = "User"
_CAPTURE = "capture"


def _at_org(scope: str) -> bool:
    return "/" not in scope


def hidden_from(row: Record | ActivityEvent, scope_key: str) -> bool:
    """Whether ``row`` (a marked org-scope record or event) is hidden from the scope ``scope_key``:
    every scope but its org's own."""
    marks = row.metadata if isinstance(row, Record) else row.details
    return bool(marks.get(UNOWNED)) and _at_org(row.scope) and scope_key != row.scope


Execute = Callable[[str, Sequence[object]], Any]


def mark_unowned_speaker_facts(
    execute: Execute, placeholder: str, stored_key: Callable[[str], object]
) -> int:
    """Mark the pre-15fe659 speaker records at org scope and their events; the number of records.

    ``execute(sql, params)`` runs a statement written with ``placeholder``; ``stored_key`` is the
    dialect's stored form of a node's name key."""
    p = placeholder
    nodes = [
        row[0] for row in execute(
            f"SELECT id, scope FROM knowledge_nodes WHERE name_key = {p}", (stored_key(name_key(_SPEAKER)),)
        ).fetchall()
        if _at_org(row[1])
    ]
    marked: dict[str, set[str]] = {}  # org scope -> its marked records
    for node_id in nodes:
        sql = f"SELECT id, scope, doc FROM knowledge_records WHERE node_id = {p}"
        rows = execute(sql, (node_id,)).fetchall()
        for record_id, scope, text in rows:
            doc = json.loads(text)
            metadata = doc.get("metadata") or {}
            if not _at_org(scope) or metadata.get("agent") != _CAPTURE or metadata.get(UNOWNED):
                continue
            doc["metadata"] = {**metadata, UNOWNED: True}
            execute(f"UPDATE knowledge_records SET doc = {p} WHERE id = {p}", (_dumps(doc), record_id))
            marked.setdefault(scope, set()).add(record_id)
    for scope, records in marked.items():  # the audit log's events about them (a reason quotes one)
        sql = f"SELECT id, doc FROM knowledge_events WHERE scope = {p}"
        for event_id, text in execute(sql, (scope,)).fetchall():
            doc = json.loads(text)
            if doc.get("subject_id") not in records:
                continue
            doc["details"] = {**(doc.get("details") or {}), UNOWNED: True}
            execute(f"UPDATE knowledge_events SET doc = {p} WHERE id = {p}", (_dumps(doc), event_id))
    return sum(len(records) for records in marked.values())


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
