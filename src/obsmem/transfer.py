"""Export and import of one resource (a user) as versioned JSON lines.

An export is a text file, one JSON object a line::

    {"format": "obsmem-export", "version": 1, "resource_id": "alice", "exported_at": "...",
     "knowledge_scope": "org:acme/resource:alice"}   (the last only when knowledge was exported)
    {"kind": "thread", "data": {...}}            every thread of the resource (title, metadata, version)
    {"kind": "message", "data": {...}}           every message, every part, by seq
    {"kind": "record", "data": {...}}            every generation of every lineage (heads and older)
    {"kind": "working_memory", "data": {...}}    thread and resource working memory
    {"kind": "knowledge_node", "data": {...}}    with a knowledge store: nodes, records (both time
    {"kind": "knowledge_record", "data": {...}}  axes, ceilings, mentions = edges), tombstones and
    {"kind": "knowledge_tombstone", ...}         forgotten values (digests) and the audit log of the
    {"kind": "knowledge_forgotten", ...}         resource's scope chain and its threads' scopes
    {"kind": "knowledge_activity", ...}
    {"kind": "end", "data": {"counts": {...}}}   the trailer: a cut file is refused

The cost ledger (``Memory.usage``) is not exported: it is an account of what this deployment's
model calls cost, not memory, so an import starts the target's ledger for the resource empty.

Every item is the pydantic model's JSON dump, so nothing is lost. :func:`import_resource`
validates the whole file before it writes anything, so a malformed line (named by its number),
an unknown major version or a resource the target already holds leaves the target untouched.

Writes go through the storage contract only, so the round trip is exact where the contract lets
a writer choose the value, and the rest is rebuilt the way the contract builds it:

* ids, ``created_at``, parts, metadata, thread versions, record ids, generations, contents,
  ``created_at``/``updated_at`` and versions of every generation are kept (a version the contract
  assigns itself is reached by compare-and-set writes of the same content; a file claiming more
  versions than its items could have made, an edited one, is refused by its line).
* ``seq`` is assigned by the target store. Messages are saved in their exported order, so an
  empty target whose counter starts where the export's did gets the same seqs (the usual case:
  an export of a store that held one resource). Otherwise the seqs differ but keep their order,
  and every seq the memory refers to is mapped onto the new ones: record cursors, buffered
  chunks' spans, retrieval groups' ``range`` and the thread's recorded instructions (that last
  one is a thread update, so such a thread's version ends one above the exported one);
  :attr:`ImportSummary.seqs_preserved` says which happened. Either way a reference past the
  export's last message (a cursor on a message deleted since, as a forget deletes one left
  empty) is brought back onto that message: the target's next messages get the seqs after it.
* Knowledge (with a knowledge store) is every row stored on the resource's knowledge scope
  chain (its org's) and below it (its threads'), exactly as stored: ids, ``captured_at``,
  revisions, trust and review state, deletions, tombstones, forgotten values (digests only) and
  the audit log. :func:`import_resource` writes them back through the knowledge store's
  restoring write (:meth:`~obsmem.knowledge.store.contract.KnowledgeStore.restore_dump`), in
  one transaction, after the memory (which a refusal there takes back), so knowledge reads
  (search, ``list_about``, ``get_record``, ``list_activity``) answer as they did; the semantic index is rebuilt from the
  records on the next drain. A row of the resource's scope whose id the target holds is refused
  (:class:`ImportConflictError`); an org row the target already holds identically is kept.
* ``knowledge_reach`` confines an import to what its caller may write (the service passes its
  key's scope): rows at or under the reach are restored; a row above it (its org's, for a
  resource) is accepted only when the target already holds it identically, and is then left as
  stored, so an export re-imports whole while nothing new or changed lands above the reach; any
  other row (new or changed above it, or outside its chain) refuses the whole file with
  :class:`KnowledgeReachError` before anything is written.
* A value forgotten after the export does not come back. With a knowledge store, every item is
  checked against the forgotten values (digests) it keeps on the chain of the scopes the import
  writes at (a value forgotten at a scope reaches what that scope reads and what lies below it,
  as the forget did), and what holds one is left out as the forget would have
  removed it: a message's text part (a tool call's arguments or result become ``[forgotten]``; a
  message left empty is not imported), an observation or working-memory line, a field, a
  knowledge row (a node named by it with its records). :attr:`ImportSummary.forgotten` counts
  them. The knowledge store's restoring write refuses a row holding a forgotten value itself
  (:class:`~obsmem.errors.TombstonedValueError`, nothing written), so a forget landing during the
  import cannot be undone by it. Without a knowledge store there is nothing to check against:
  the message store keeps no trace of a forgotten value.

An export is read through ordinary reads, not one snapshot: export a resource while nothing
writes to it (no turn, no background worker) for a consistent file.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, ValidationError

from obsmem.errors import (
    CeilingExceededError,
    ExportFormatError,
    ExportVersionError,
    ImportConflictError,
    ImportUnsupportedError,
    InvalidInputError,
    KnowledgeReachError,
    StorageError,
    ThreadNotFoundError,
)
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import DEFAULT_ORG, scope_key
from obsmem.knowledge.store.contract import (
    ActivityEvent,
    ForgottenValue,
    KnowledgeDump,
    KnowledgeStore,
    Node,
    Record,
    Tombstone,
)
from obsmem.knowledge.store.erasure import forgettable_texts
from obsmem.knowledge.store.scopes import Level, Scope, check_within_ceiling
from obsmem.knowledge.store.tables import under
from obsmem.knowledge.store.values import exact_digest, forgotten_digest, value_key
from obsmem.om.llm.parsing import TAG_SHAPED
from obsmem.om.text.groups import is_group_tag
from obsmem.storage.contract import (
    MAX_FORGOTTEN_IDS, BufferedChunk, ObservationRecord, Store, ThreadState, every_forgotten_id, lineage_key,
    note_forgotten_ids, rewriting,
)
from obsmem.storage.forgetting import (
    canonical, forget_in_message, forget_in_record, forget_in_thread_metadata, forget_lines, forgotten_id_list,
    json_strings, with_forgotten_id_list,
)
from obsmem.storage.leasing import acquired, ended_here, holding, process_owner, run_to_end
from obsmem.storage.notes import erasing_note, import_note
from obsmem.storage.paging import all_threads
from obsmem.clock import SystemClock
from obsmem.tokens import TokenCounter
from obsmem.types import Message, Thread, utcnow

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportFormatError",
    "ExportSummary",
    "ExportVersionError",
    "ImportConflictError",
    "ImportSummary",
    "ImportUnsupportedError",
    "KnowledgeReachError",
    "export_resource",
    "import_resource",
]

EXPORT_FORMAT = "obsmem-export"
EXPORT_VERSION = 1

_PAGE = 100

ItemKind = Literal[
    "thread",
    "message",
    "record",
    "working_memory",
    "knowledge_node",
    "knowledge_record",
    "knowledge_tombstone",
    "knowledge_forgotten",
    "knowledge_activity",
    "end",
]
_KNOWLEDGE_KINDS = (
    "knowledge_node",
    "knowledge_record",
    "knowledge_tombstone",
    "knowledge_forgotten",
    "knowledge_activity",
)


# -- lines -------------------------------------------------------------------------------------------


class _Header(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["obsmem-export"]
    version: int
    resource_id: str
    exported_at: datetime
    knowledge_scope: str | None = None


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: ItemKind
    data: dict[str, Any]


class WorkingMemoryItem(BaseModel):
    """One working-memory text under its store key (``thread:<id>`` or ``resource:<id>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    text: str


class _End(BaseModel):
    model_config = ConfigDict(extra="forbid")

    counts: dict[str, int]


_MODELS: dict[str, type[BaseModel]] = {
    "thread": Thread,
    "message": Message,
    "record": ObservationRecord,
    "working_memory": WorkingMemoryItem,
    "knowledge_node": Node,
    "knowledge_record": Record,
    "knowledge_tombstone": Tombstone,
    "knowledge_forgotten": ForgottenValue,
    "knowledge_activity": ActivityEvent,
    "end": _End,
}


@dataclass(slots=True)
class ExportSummary:
    """What :func:`export_resource` wrote: items per kind (``thread``, ``message``, ...)."""

    resource_id: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class ImportSummary:
    """What :func:`import_resource` wrote.

    ``seqs_preserved``: every message got the seq it had in the export (else they were
    renumbered in order and every reference to them mapped). ``skipped``: items read but not
    written (knowledge lines when no knowledge store was given). ``forgotten``: what was left out
    or cut because it holds a value forgotten in the knowledge store after the export (see
    :func:`import_resource`), per kind: ``message`` (dropped), ``part`` (a message cut),
    ``record`` / ``working_memory`` / ``thread`` (lines or fields cut), ``knowledge_<kind>``
    (rows left out; ``knowledge_node_scrubbed``: a node's field cut).
    """

    resource_id: str
    counts: dict[str, int] = field(default_factory=dict)
    seqs_preserved: bool = True
    skipped: dict[str, int] = field(default_factory=dict)
    forgotten: dict[str, int] = field(default_factory=dict)


def _line(kind: str, model: BaseModel) -> str:
    return json.dumps({"kind": kind, "data": model.model_dump(mode="json")}, ensure_ascii=False)


@contextmanager
def _writer(out: TextIO | str | os.PathLike[str]) -> Iterator[TextIO]:
    if isinstance(out, str | os.PathLike):
        with Path(out).open("w", encoding="utf-8", newline="\n") as handle:
            yield handle
    else:
        yield out


@contextmanager
def _reader(source: TextIO | Iterable[str] | str | os.PathLike[str]) -> Iterator[Iterable[str]]:
    if isinstance(source, str | os.PathLike):
        with Path(source).open(encoding="utf-8") as handle:
            yield _utf8_lines(handle)
    else:
        yield source


def _utf8_lines(handle: Iterable[str]) -> Iterator[str]:
    """The lines of a file opened as UTF-8; bytes that are not UTF-8 are an :class:`ExportFormatError`
    at the line being read (the decoder reads ahead, so at that line or just before it)."""
    lines = iter(handle)
    number = 0
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise ExportFormatError(number + 1, "not UTF-8 text") from None
        number += 1
        yield line


# -- export ------------------------------------------------------------------------------------------


async def _threads(store: Store, resource_id: str) -> list[Thread]:
    return await all_threads(store, resource_id, page=_PAGE)


async def _generations(store: Store, lineage: str) -> list[ObservationRecord]:
    """Every generation of ``lineage``, oldest first."""
    records: list[ObservationRecord] = []
    while True:
        page = await store.list_generations(lineage, limit=_PAGE, offset=len(records))
        records.extend(page)
        if len(page) < _PAGE:
            return sorted(records, key=lambda r: r.generation)


def _knowledge_store(knowledge: Knowledge | KnowledgeStore | None) -> KnowledgeStore | None:
    return knowledge.store if isinstance(knowledge, Knowledge) else knowledge


_KnowledgeRow = Node | Record | Tombstone | ForgottenValue | ActivityEvent


async def _knowledge_items(store: KnowledgeStore, scope: str) -> list[tuple[str, _KnowledgeRow]]:
    """Every row on ``scope``'s chain and below it, as stored (deleted, superseded, candidate and
    rejected records, merged nodes, tombstones, forgotten values, the audit log)."""
    dump = await store.dump_scope(scope)
    items: list[tuple[str, _KnowledgeRow]] = []
    items.extend(("knowledge_node", node) for node in dump.nodes)
    items.extend(("knowledge_record", record) for record in dump.records)
    items.extend(("knowledge_tombstone", tombstone) for tombstone in dump.tombstones)
    items.extend(("knowledge_forgotten", forgotten) for forgotten in dump.forgotten)
    items.extend(("knowledge_activity", event) for event in dump.events)
    return items


def _default_scope(threads: list[Thread], resource_id: str) -> str | None:
    """The knowledge scope of the resource's threads: a thread without an org is in
    :data:`~obsmem.knowledge.lifecycle.DEFAULT_ORG`, as Memory's knowledge agents put it. None
    for an id no knowledge scope can hold ('tenant/42', which the gateway takes from a request's
    ``user``): such a resource has no knowledge, and its id spelled into a scope named another's
    ('kn/thread:t1' read as resource kn's thread t1, whose scope chain holds kn's knowledge)."""
    orgs = {t.org_id or DEFAULT_ORG for t in threads}
    if len(orgs) != 1:
        raise InvalidInputError(
            f"The threads of resource '{resource_id}' do not name one organisation "
            f"({sorted(str(o) for o in orgs)}), so its knowledge scope is unknown: pass "
            "knowledge_scope='org:<id>/resource:<id>'.",
            argument="knowledge_scope",
        )
    return scope_key(orgs.pop(), resource_id)


async def _erasing_thread(store: Store, resource_id: str) -> str | None:
    """A thread of ``resource_id`` a delete (``Memory.delete_thread`` / ``delete_resource``) is
    under way for, or was cut off midway in (its process killed), else None. Its notes
    (storage.notes) say so: the resource's list of the threads being deleted, each with its own
    note until it is done."""
    text = await store.get_working_memory(erasing_note("resource", resource_id))
    if text is None:
        return None
    try:
        listed = json.loads(text).get("threads")
    except (ValueError, AttributeError):  # not a note obsmem wrote: nothing under way
        return None
    if not isinstance(listed, dict):
        return None
    for thread_id in sorted(t for t in listed if isinstance(t, str) and t):
        if await store.get_working_memory(erasing_note("thread", thread_id)) is not None:
            return thread_id
    return None


_FINISH_DELETE = "Finish it first: delete_resource (obsmem delete-resource, DELETE /api/resources/{id}) again."


async def _check_not_erasing(store: Store, resource_id: str) -> None:
    """Refuse to export a resource being deleted (see :func:`_erasing_thread`): what is left of
    it is still stored, and an export would hand it out whole, to be imported anywhere."""
    thread_id = await _erasing_thread(store, resource_id)
    if thread_id is not None:
        raise InvalidInputError(
            f"A delete of resource '{resource_id}' (its thread '{thread_id}') is under way or was cut off "
            f"midway; nothing of it is exported. {_FINISH_DELETE}",
            argument="resource_id",
        )


async def export_resource(
    store: Store,
    resource_id: str,
    out: TextIO | str | os.PathLike[str],
    *,
    knowledge: Knowledge | KnowledgeStore | None = None,
    knowledge_scope: str | None = None,
) -> ExportSummary:
    """Write everything ``store`` (and ``knowledge``) holds for ``resource_id`` to ``out``.

    ``out``: a text stream or a file path. ``knowledge_scope``: the knowledge scope the resource's
    knowledge is read from (default ``org:<org_id>/resource:<resource_id>`` from the threads'
    ``org_id``, ``org:default`` for threads without one; required when they name several);
    everything visible from it (its ancestors' too)
    is exported. A resource without threads is refused with
    :class:`~obsmem.errors.InvalidInputError` (most likely a mistyped id), and so is one whose
    delete is under way or was cut off midway (``Memory.unfinished_deletes``): nothing of a user
    being deleted comes out; ``delete_resource`` again finishes it.
    """
    if not isinstance(resource_id, str) or not resource_id:
        raise InvalidInputError("resource_id must be a non-empty string.", argument="resource_id")
    await _check_not_erasing(store, resource_id)
    threads = await _threads(store, resource_id)
    if not threads:
        raise InvalidInputError(
            f"No threads for resource '{resource_id}' in this store; nothing to export.",
            argument="resource_id",
        )
    # A thread's forgotten ids, every one (its row keeps the newest 1,000; the store the rest):
    # an import keeps them all, so the old history saved back brings nothing forgotten back.
    items: list[tuple[str, BaseModel]] = [
        ("thread", with_forgotten_id_list(t, await every_forgotten_id(store, t.id, forgotten_id_list(t))))
        if len(forgotten_id_list(t)) >= MAX_FORGOTTEN_IDS else ("thread", t)
        for t in threads
    ]
    messages: list[Message] = []
    for thread in threads:
        messages.extend(await store.list_messages(thread.id))
    items.extend(("message", m) for m in sorted(messages, key=lambda m: m.seq or 0))
    lineages = [lineage_key("thread", t.id, resource_id) for t in threads]
    lineages.append(lineage_key("resource", None, resource_id))
    for lineage in lineages:
        items.extend(("record", r) for r in await _generations(store, lineage))
    keys = [f"thread:{t.id}" for t in threads] + [f"resource:{resource_id}"]
    for key in keys:
        text = await store.get_working_memory(key)
        if text is not None:
            items.append(("working_memory", WorkingMemoryItem(key=key, text=text)))
    knowledge_store = _knowledge_store(knowledge)
    scope: str | None = None
    if knowledge_store is not None:
        scope = Scope.parse(knowledge_scope).key if knowledge_scope else _default_scope(threads, resource_id)
        if scope is not None:
            items.extend(await _knowledge_items(knowledge_store, scope))

    summary = ExportSummary(resource_id=resource_id)
    for kind, _ in items:
        summary.counts[kind] = summary.counts.get(kind, 0) + 1
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "resource_id": resource_id,
        "exported_at": utcnow().isoformat(),
    }
    if scope is not None:
        header["knowledge_scope"] = scope
    await _check_not_erasing(store, resource_id)  # one begun while it was read: its note is set before it deletes
    with _writer(out) as handle:
        handle.write(json.dumps(header, ensure_ascii=False) + "\n")
        # the lines are written out in a thread, a batch at a time: 20,000 messages held the event
        # loop 0.66 s (a server's other requests with it), a pasted log's message its megabytes
        for start in range(0, len(items), _DUMP_BATCH):
            handle.write(await asyncio.to_thread(_lines, items[start : start + _DUMP_BATCH]))
        handle.write(_line("end", _End(counts=summary.counts)) + "\n")
    return summary


_DUMP_BATCH = 256  # items written out per thread call


def _lines(items: list[tuple[str, BaseModel]]) -> str:
    return "".join(f"{_line(kind, model)}\n" for kind, model in items)


# -- reading an export -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Parsed:
    resource_id: str
    items: dict[str, list[Any]]
    knowledge_scope: str | None = None
    #: The exported resource id, when the import moves it onto another (``into_resource``).
    renamed_from: str | None = None


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', 'invalid')}"


class _NotJSON(ValueError):
    pass


def _no_constant(name: str) -> object:
    """Python's JSON reader takes NaN and ±Infinity, which are no JSON (no export holds them):
    refused, not stored as null."""
    raise _NotJSON(f"{name} is not a JSON number")


def _utf8(raw: str, value: object) -> bool:
    """Whether a line is text UTF-8 can hold: no lone surrogate, raw (bytes that were not UTF-8,
    read from a stream decoded with ``surrogateescape``, as Python's stdin is) or escaped
    (``"\\udcff"``). Stored, such text could never be written out again (an export, a model call)."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if "\\u" not in raw and "\\U" not in raw:
        return True  # (an escaped surrogate is the only other way one comes in)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def _parse(lines: Iterable[str]) -> _Parsed:
    header: _Header | None = None
    items: dict[str, list[Any]] = {kind: [] for kind in _MODELS}
    ended = False
    number = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if ended:
            raise ExportFormatError(number, "content after the end line")
        try:
            value = json.loads(raw, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise ExportFormatError(number, f"not JSON ({exc.msg})") from None
        except _NotJSON as exc:
            raise ExportFormatError(number, f"not JSON ({exc})") from None
        except RecursionError:  # nested past Python's limit: no export is, and it must not escape as a crash
            raise ExportFormatError(number, "JSON nested too deeply") from None
        if not isinstance(value, dict):
            raise ExportFormatError(number, "not a JSON object")
        if not _utf8(raw, value):
            raise ExportFormatError(number, "not UTF-8 text")
        if header is None:
            if value.get("format") != EXPORT_FORMAT:
                raise ExportFormatError(number, f"not an obsmem export (format {value.get('format')!r})")
            version = value.get("version")
            if version != EXPORT_VERSION:
                raise ExportVersionError(version)
            try:
                header = _Header.model_validate(value)
            except ValidationError as exc:
                raise ExportFormatError(number, _problem(exc)) from None
            continue
        try:
            item = _Item.model_validate(value)
            model = _MODELS[item.kind].model_validate(item.data)
            model.model_dump(mode="json")  # as a store writes it: valid but too deep to write is refused now
        except ValidationError as exc:
            raise ExportFormatError(number, _problem(exc)) from None
        except ValueError as exc:  # pydantic's serializer: "Maximum serialization depth exceeded"
            raise ExportFormatError(number, f"cannot be stored ({exc})") from None
        items[item.kind].append((number, model))
        ended = item.kind == "end"
    if header is None:
        raise ExportFormatError(0, "empty: no header line")
    if not ended:
        raise ExportFormatError(number, "the file ends without its end line (cut short?)")
    (end_line, end), *_ = items.pop("end")
    counts = {kind: len(found) for kind, found in items.items() if found}
    if counts != end.counts:
        raise ExportFormatError(end_line, f"item counts {counts} differ from the recorded {end.counts}")
    _check_consistent(header.resource_id, items)
    parsed = _Parsed(resource_id=header.resource_id, items=items, knowledge_scope=header.knowledge_scope)
    _check_knowledge(parsed)
    return parsed


#: The versions an import may have to reach by writing (see :func:`_write_lineage`): a later
#: generation starts at version 1 and reaches its exported version one compare-and-set write a
#: version. Memory's writes to a generation come with the turns that saved messages (or the
#: chunks, forgets and reflections of the file), so a real export needs a few writes an item; a
#: file asking for more (``"version": 10000000`` edited in) is refused by its line, not written
#: ten million times.
_CATCH_UP_FLOOR = 10_000
_CATCH_UP_PER_ITEM = 20


def _check_consistent(resource_id: str, items: dict[str, list[Any]]) -> None:
    """What the models cannot check alone: ownership, uniqueness, complete lineages."""
    thread_ids: set[str] = set()
    for number, thread in items["thread"]:
        if thread.resource_id != resource_id:
            raise ExportFormatError(number, f"thread '{thread.id}' belongs to resource '{thread.resource_id}'")
        if thread.id in thread_ids:
            raise ExportFormatError(number, f"thread '{thread.id}' appears twice")
        thread_ids.add(thread.id)
    message_ids: set[str] = set()
    last_seq = 0
    for number, message in items["message"]:
        if message.thread_id not in thread_ids:
            raise ExportFormatError(number, f"message '{message.id}' names an unknown thread")
        if message.resource_id not in (None, resource_id):
            raise ExportFormatError(number, f"message '{message.id}' belongs to another resource")
        if message.id in message_ids:
            raise ExportFormatError(number, f"message '{message.id}' appears twice")
        if message.seq is None or message.seq <= last_seq:
            raise ExportFormatError(number, f"message '{message.id}' is out of seq order")
        message_ids.add(message.id)
        last_seq = message.seq
    lineages: dict[str, list[tuple[int, ObservationRecord]]] = {}
    for number, record in items["record"]:
        if record.resource_id != resource_id or (record.scope == "thread" and record.thread_id not in thread_ids):
            raise ExportFormatError(number, f"record '{record.id}' belongs to another resource or thread")
        if record.lineage != lineage_key(record.scope, record.thread_id, record.resource_id):
            raise ExportFormatError(number, f"record '{record.id}' has lineage '{record.lineage}'")
        lineages.setdefault(record.lineage, []).append((number, record))
    catch_up = 0
    allowed = _CATCH_UP_FLOOR + _CATCH_UP_PER_ITEM * sum(len(found) for found in items.values())
    for chain in lineages.values():
        for (_, older), (number, newer) in zip(chain, chain[1:], strict=False):
            if older.superseded_by != newer.id or newer.generation != older.generation + 1 or older.version < 2:
                raise ExportFormatError(number, f"record '{newer.id}' does not follow '{older.id}' in its lineage")
            # a successor starts at version 1 and reaches its own by one write a version (_write_lineage)
            catch_up += max(0, (newer.version if newer.is_live else newer.version - 1) - 1)
            if catch_up > allowed:
                raise ExportFormatError(
                    number,
                    f"record '{newer.id}' has version {newer.version}, more writes than this file's "
                    f"{sum(len(found) for found in items.values())} items could have made (an edited export)",
                )
        number, head = chain[-1]
        if not head.is_live:
            raise ExportFormatError(number, f"lineage '{head.lineage}' has no live head")
    memory_keys = {f"thread:{t}" for t in thread_ids} | {f"resource:{resource_id}"}
    for number, memory in items["working_memory"]:
        if memory.key not in memory_keys:
            raise ExportFormatError(number, f"working memory key '{memory.key}' is not this resource's")


def _check_knowledge(parsed: _Parsed, header_line: int = 1) -> None:
    """Knowledge rows need the scope they were exported from, and must lie on its chain or below it."""
    found = [(n, row) for kind in _KNOWLEDGE_KINDS for n, row in parsed.items[kind]]
    if not found:
        return
    if parsed.knowledge_scope is None:
        raise ExportFormatError(header_line, "knowledge items without the header's knowledge_scope")
    try:
        scope = Scope.parse(parsed.knowledge_scope)
    except InvalidInputError as exc:
        raise ExportFormatError(header_line, f"knowledge_scope: {exc}") from None
    for number, row in found:
        if not (scope.sees(row.scope) or under(row.scope, scope.key)):
            raise ExportFormatError(number, f"knowledge row '{row.id}' lies outside '{scope.key}'")
    for number, row in parsed.items["knowledge_record"]:
        # a record kept broader than its own ceiling is not one obsmem writes (an edited export)
        try:
            check_within_ceiling(row.scope, row.max_scope)
        except CeilingExceededError as exc:
            raise ExportFormatError(number, f"knowledge record '{row.id}': {exc}") from None


# -- seq mapping ---------------------------------------------------------------------------------------

_GROUP_RANGE = re.compile(r'^(\s*<observation-group\s[^<>\n]*\brange=")(\d+):(\d+)(")', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class _SeqMap:
    """Old seqs (sorted) onto the new ones, order kept; seqs between messages map to their neighbours.

    With the seqs kept (``identity``) a seq up to the last message's stays as it is, but one past
    it (a cursor on a message deleted since, as a forget deletes a message left empty) is brought
    back onto the last message: the target gives out the seqs after it to the next messages,
    which such a cursor would count as observed already (the source never reuses a seq).
    """

    old: list[int]
    new: list[int]

    @property
    def identity(self) -> bool:
        return self.old == self.new

    def _kept(self, seq: int) -> bool:
        return self.identity and seq <= (self.old[-1] if self.old else 0)

    def upto(self, seq: int) -> int:
        """The new seq of the last message at or below ``seq`` (a cursor, a span's end); 0 if none."""
        from bisect import bisect_right

        if self._kept(seq):
            return seq
        index = bisect_right(self.old, seq)
        return self.new[index - 1] if index else 0

    def from_(self, seq: int) -> int:
        """The new seq of the first message at or above ``seq`` (a span's start)."""
        from bisect import bisect_left

        if self._kept(seq):
            return seq
        index = bisect_left(self.old, seq)
        return self.new[index] if index < len(self.new) else self.upto(seq)

    def text(self, text: str) -> str:
        if "<observation-group" not in text:
            return text
        return _GROUP_RANGE.sub(
            lambda m: f"{m[1]}{self.from_(int(m[2]))}:{self.upto(int(m[3]))}{m[4]}", text
        )

    def record(self, record: ObservationRecord) -> ObservationRecord:
        chunks = tuple(
            c.model_copy(
                update={
                    "first_seq": self.from_(c.first_seq),
                    "last_seq": self.upto(c.last_seq),
                    "observations": self.text(c.observations),
                }
            )
            for c in record.buffered_chunks
        )
        reflection = record.buffered_reflection
        if reflection is not None:
            reflection = reflection.model_copy(update={"text": self.text(reflection.text)})
        mapped = record.model_copy(
            update={
                "threads": {
                    tid: state.model_copy(update={"cursor": self.upto(state.cursor)})
                    for tid, state in record.threads.items()
                },
                "buffered_chunks": chunks,
                "buffered_reflection": reflection,
                "active_observations": self.text(record.active_observations),
            }
        )
        return record if mapped == record else mapped

    def thread(self, thread: Thread) -> Thread:
        own = thread.metadata.get("obsmem")
        recorded = own.get("instructions") if isinstance(own, dict) else None
        if not isinstance(recorded, dict) or not isinstance(recorded.get("seq"), int):
            return thread
        if self.upto(recorded["seq"]) == recorded["seq"]:
            return thread
        assert isinstance(own, dict)
        instructions = {**recorded, "seq": self.upto(recorded["seq"])}
        metadata = {**thread.metadata, "obsmem": {**own, "instructions": instructions}}
        return thread.model_copy(update={"metadata": metadata})


# -- observations are data --------------------------------------------------------------------------------
# What the observer stores is made data first (obsmem.om.llm.parsing: the "<" of every tag-shaped
# token written "&lt;"), so no observation can close obsmem's blocks in a model's context or open
# one of its own. An export is a file its holder may edit: an import applies the same rule to
# every text a record puts in the context, keeping obsmem's own structure lines (observation
# groups, resource-scope thread sections), which hold no other text.

_SECTION_LINE = re.compile(r'^\s*(?:<thread id="[^"<>]+">|</thread>)\s*$')


def _data(text: str | None) -> str | None:
    return TAG_SHAPED.sub("&lt;", text) if text and "<" in text else text


def _data_lines(text: str) -> str:
    """``text`` as data, line by line; obsmem's own structure lines kept."""
    if "<" not in text:
        return text
    return "\n".join(
        line if is_group_tag(line) or _SECTION_LINE.match(line) else TAG_SHAPED.sub("&lt;", line)
        for line in text.split("\n")
    )


def _record_as_data(record: ObservationRecord) -> ObservationRecord:
    def state(value: ThreadState) -> ThreadState:
        return value.model_copy(update={
            "current_task": _data(value.current_task),
            "suggested_response": _data(value.suggested_response),
            "thread_title": _data(value.thread_title),
        })  # fmt: skip

    def chunk(value: BufferedChunk) -> BufferedChunk:
        return value.model_copy(update={
            "observations": _data_lines(value.observations),
            "current_task": _data(value.current_task),
            "suggested_response": _data(value.suggested_response),
        })  # fmt: skip

    reflection = record.buffered_reflection
    if reflection is not None:
        reflection = reflection.model_copy(update={"text": _data_lines(reflection.text)})
    cleaned = record.model_copy(update={
        "active_observations": _data_lines(record.active_observations),
        "threads": {tid: state(value) for tid, value in record.threads.items()},
        "buffered_chunks": tuple(chunk(c) for c in record.buffered_chunks),
        "buffered_reflection": reflection,
    })  # fmt: skip
    return record if cleaned == record else cleaned


# -- forgotten values ----------------------------------------------------------------------------------
# An export written before a forget still holds the value. The forget left its digests in the
# knowledge store (a ForgottenValue, the only trace of it anywhere), and a forgotten value "cannot
# come back": so an import applies the forget again to everything it is about to write, with the
# forget's granularity (obsmem.storage.forgetting for messages, observations and working memory;
# the knowledge store's forget_value for knowledge rows) and its matching: the value as
# Memory.forget matched it (the row's exact digests, over the text's canonical spelling: "Ann" is
# not in "planning") for the first, the knowledge store's broad key (forgotten_in) for knowledge
# rows and for a row without exact digests (an older obsmem's, a phone number's). A value
# forgotten at a scope reaches what that scope reads and what lies below it, as the forget did.

_Hit = Callable[[str], bool]


def _scope_key(org: str | None, resource: str, thread: str | None = None) -> str:
    """The knowledge scope Memory's knowledge uses for a thread (or resource); an id a scope cannot
    hold falls back to the broader level (no knowledge was ever stored below it)."""
    org = org or DEFAULT_ORG
    chain: list[tuple[str, ...]] = [(org, resource, thread)] if thread is not None else []
    for ids in [*chain, (org, resource), (org,)]:
        try:
            return Scope(*ids).key
        except InvalidInputError:
            continue
    return Scope(DEFAULT_ORG).key


def _exported_scopes(scopes: Iterable[str], parsed: _Parsed) -> set[str]:
    """``scopes`` and, for an import under another resource id (``into_resource``), each one of
    the target resource's as the exported resource's: a value forgotten for the user the backup
    is of stays forgotten in the copy (moved onto "alice2", "Zaphod" forgotten for alice came back)."""
    found = set(scopes)
    old = parsed.renamed_from
    if old is None:
        return found
    for key in list(found):
        scope = Scope.parse(key)
        if scope.resource == parsed.resource_id:
            try:
                found.add(Scope(scope.org, old, scope.thread).key)
            except InvalidInputError:
                continue  # an id no scope can hold: nothing was ever forgotten under it
    return found


class _Forgotten:
    """The forgotten values an import checks against, and what it left out because of them."""

    def __init__(self, values: Iterable[ForgottenValue], parsed: _Parsed) -> None:
        unique = {value.id: value for value in values if value.length > 0 or value.exact_digests}
        self.values = list(unique.values())
        self._at: dict[tuple[bool, tuple[str, ...]], _Hit] = {}
        self.counts: dict[str, int] = {}
        self._parsed = parsed

    def count(self, kind: str, n: int = 1) -> None:
        if n:
            self.counts[kind] = self.counts.get(kind, 0) + n

    def at(self, *scopes: str) -> _Hit:
        """Whether a text holds a value forgotten where it reaches any of ``scopes``, as the
        forget of messages, observations and working memory matched it."""
        return self._hit(False, scopes)

    def knowledge_at(self, *scopes: str) -> _Hit:
        """:meth:`at` as the knowledge store's forget matched it (its broad key)."""
        return self._hit(True, scopes)

    def _hit(self, broad: bool, scopes: tuple[str, ...]) -> _Hit:
        key = (broad, tuple(sorted(set(scopes))))
        hit = self._at.get(key)
        if hit is None:
            here = [Scope.parse(scope) for scope in _exported_scopes(key[1], self._parsed)]

            def reaches(value: ForgottenValue) -> bool:
                where = Scope.parse(value.scope)
                return any(s.sees(where) or where.sees(s) for s in here)

            applying = [v for v in self.values if reaches(v)]
            hit = self._at[key] = _matcher(
                {(v.digest, v.length) for v in applying if broad or v.exact_digests is None},
                # a value without a key (no letter or digit) is matched exactly in knowledge too
                {pair for v in applying if not broad or v.length == 0 for pair in v.exact_digests or ()},
            )
        return hit


def _matcher(digests: Iterable[tuple[str, int]], exact: Iterable[tuple[str, int]] = ()) -> _Hit:
    """:func:`~obsmem.knowledge.store.values.forgotten_in` over ``digests``, grouped by length
    once: forgotten_in groups them at each call, so an import asking of each of M messages took
    M × K steps for K forgotten values; and ``exact`` (exact digests and lengths) over the windows
    of the text's canonical spelling, as :func:`obsmem.storage.forgetting.holds` finds a value.
    A text costs one hash per character per distinct length."""
    wanted: dict[int, set[str]] = {}
    for digest, length in digests:
        if length > 0:
            wanted.setdefault(length, set()).add(digest)
    exactly: dict[int, set[str]] = {}
    for digest, length in exact:
        if length > 0:
            exactly.setdefault(length, set()).add(digest)

    def hit(text: str) -> bool:
        if exactly:
            form = canonical(text)
            if any(
                exact_digest(form[start : start + length]) in found
                for length, found in exactly.items() for start in range(len(form) - length + 1)
            ):
                return True
        if not wanted:
            return False
        key = value_key(text)
        return any(
            forgotten_digest(key[start : start + length]) in found
            for length, found in wanted.items() for start in range(len(key) - length + 1)
        )

    return hit


async def _forgotten_values(store: KnowledgeStore, parsed: _Parsed) -> _Forgotten:
    """The knowledge store's forgotten values on the chain of every scope the import writes at.

    The export's own forgotten values are not needed here: its rows are what the source kept
    after those forgets (the restoring write still refuses a row holding one)."""
    items = parsed.items
    scopes = {row.scope for kind in _KNOWLEDGE_KINDS for _, row in items[kind]}
    scopes |= {_scope_key(t.org_id, t.resource_id, t.id) for _, t in items["thread"]}
    scopes |= {_scope_key(t.org_id, t.resource_id) for _, t in items["thread"]}
    values: list[ForgottenValue] = []
    for scope in sorted(_exported_scopes(scopes, parsed)):
        values.extend(await store.list_forgotten(scope))
    return _Forgotten(values, parsed)


def _kept_field(text: str | None, hit: _Hit) -> str | None:
    return None if text is not None and hit(text) else text


def _leave_out_forgotten(parsed: _Parsed, forgotten: _Forgotten) -> None:
    """Apply the forgotten values to the parsed items before anything is written."""
    items = parsed.items
    threads = {t.id: t for _, t in items["thread"]}
    resource_scopes = sorted({_scope_key(t.org_id, t.resource_id) for t in threads.values()}) or [
        _scope_key(None, parsed.resource_id)
    ]

    def thread_hit(thread_id: str | None) -> _Hit:
        thread = threads.get(thread_id or "")
        if thread is None:
            return forgotten.at(*resource_scopes)
        return forgotten.at(_scope_key(thread.org_id, thread.resource_id, thread.id))

    kept_threads = []
    for number, thread in items["thread"]:
        hit = thread_hit(thread.id)
        title = _kept_field(thread.title, hit)
        metadata = forget_in_thread_metadata(thread.metadata, hit)
        if title != thread.title or metadata != thread.metadata:
            forgotten.count("thread")
            thread = thread.model_copy(update={"title": title, "metadata": metadata})
        kept_threads.append((number, thread))
    items["thread"] = kept_threads

    kept_messages = []
    for number, message in items["message"]:
        kept = forget_in_message(message, thread_hit(message.thread_id))
        if kept is None:
            forgotten.count("message")
            continue
        if kept is not message:
            forgotten.count("part")
        kept_messages.append((number, kept))
    items["message"] = kept_messages

    counter: TokenCounter | None = None

    def count(text: str) -> int:
        nonlocal counter
        counter = counter or TokenCounter()
        return counter.count_text(text)

    kept_records = []
    for number, record in items["record"]:
        hit = thread_hit(record.thread_id) if record.scope == "thread" else forgotten.at(*resource_scopes)
        cleaned = forget_in_record(record, hit, count)
        if cleaned is not record:
            forgotten.count("record")
        kept_records.append((number, cleaned))
    items["record"] = kept_records

    kept_memory = []
    for number, memory in items["working_memory"]:
        thread_id = memory.key.removeprefix("thread:") if memory.key.startswith("thread:") else None
        hit = thread_hit(thread_id) if thread_id is not None else forgotten.at(*resource_scopes)
        text = forget_lines(memory.text, hit)
        if text != memory.text:
            forgotten.count("working_memory")
            if not text.strip():
                continue
            memory = memory.model_copy(update={"text": text})
        kept_memory.append((number, memory))
    items["working_memory"] = kept_memory

    _leave_out_forgotten_knowledge(parsed, forgotten)


def _leave_out_forgotten_knowledge(parsed: _Parsed, forgotten: _Forgotten) -> None:
    """As the knowledge store's forget: a node named by the value goes with its records and
    tombstones; a node's content, description or metadata holding it is cut; a record, tombstone
    or audit event holding it goes; links to a node that went are dropped."""
    items = parsed.items

    def holds(row: Node | Record | Tombstone | ActivityEvent, *texts: Any) -> bool:
        hit = forgotten.knowledge_at(row.scope)
        return any(hit(text) for text in json_strings(list(texts), scalars=False))

    gone = {node.id for _, node in items["knowledge_node"] if holds(node, node.name, node.kind)}
    nodes = []
    for number, node in items["knowledge_node"]:
        if node.id in gone:
            forgotten.count("knowledge_node")
            continue
        changes: dict[str, Any] = {}
        if node.content is not None and holds(node, node.content):
            changes["content"] = None
        if node.description is not None and holds(node, node.description):
            changes["description"] = None
        if holds(node, node.metadata):
            changes["metadata"] = {k: v for k, v in node.metadata.items() if not holds(node, k, v)}
        if changes:
            forgotten.count("knowledge_node_scrubbed")
        if any(target in gone for target in node.mentions):
            changes["mentions"] = tuple(target for target in node.mentions if target not in gone)
        nodes.append((number, node.model_copy(update=changes) if changes else node))
    items["knowledge_node"] = nodes
    records = []
    for number, record in items["knowledge_record"]:
        if record.node_id in gone or holds(record, *forgettable_texts(record)):
            forgotten.count("knowledge_record")
            continue
        if any(target in gone for target in record.mentions):
            record = record.model_copy(update={"mentions": tuple(t for t in record.mentions if t not in gone)})
        records.append((number, record))
    items["knowledge_record"] = records
    for kind in ("knowledge_tombstone", "knowledge_activity"):
        rows = []
        for number, row in items[kind]:
            if (isinstance(row, Tombstone) and row.node_id in gone) or holds(row, *forgettable_texts(row)):
                forgotten.count(kind)
                continue
            rows.append((number, row))
        items[kind] = rows


# -- import --------------------------------------------------------------------------------------------


def _rename(parsed: _Parsed, into: str) -> None:
    """Move every item from the exported resource id onto ``into`` (thread ids stay)."""
    old = parsed.resource_id
    items = parsed.items
    items["thread"] = [(n, t.model_copy(update={"resource_id": into})) for n, t in items["thread"]]
    items["message"] = [
        (n, m.model_copy(update={"resource_id": into if m.resource_id is not None else None}))
        for n, m in items["message"]
    ]
    items["record"] = [
        (n, r.model_copy(update={"resource_id": into, "lineage": lineage_key(r.scope, r.thread_id, into)}))
        for n, r in items["record"]
    ]
    items["working_memory"] = [
        (n, w.model_copy(update={"key": f"resource:{into}"}) if w.key == f"resource:{old}" else w)
        for n, w in items["working_memory"]
    ]
    parsed.resource_id = into
    parsed.renamed_from = parsed.renamed_from or old
    if parsed.knowledge_scope is not None:
        _rename_knowledge(parsed, old, into)


def _rename_knowledge(parsed: _Parsed, old: str, into: str) -> None:
    """Move the knowledge rows of the exported resource's scope (and its threads') onto ``into``."""
    assert parsed.knowledge_scope is not None
    exported = Scope.parse(parsed.knowledge_scope)
    if exported.level < Level.RESOURCE or exported.resource != old:
        return  # not a resource's scope: nothing in it names the resource
    source = exported.at(Level.RESOURCE).key
    target = Scope(exported.org, into).key

    def moved(key: Any) -> Any:
        if isinstance(key, str) and under(key, source):
            return target + key[len(source) :]
        return key

    for kind in _KNOWLEDGE_KINDS:
        rows = []
        for number, row in parsed.items[kind]:
            update: dict[str, Any] = {"scope": moved(row.scope)}
            if isinstance(row, ActivityEvent) and row.details:
                update["details"] = {k: moved(v) for k, v in row.details.items()}
            rows.append((number, row.model_copy(update=update)))
        parsed.items[kind] = rows
    parsed.knowledge_scope = moved(exported.key)


def _comparable(row: BaseModel) -> BaseModel:
    # a record's valid_until is filled in by reads, never stored (the store compares it the same way)
    return row.model_copy(update={"valid_until": None}) if isinstance(row, Record) else row


async def _confine_knowledge(parsed: _Parsed, store: KnowledgeStore, reach: Scope) -> None:
    """Keep only the knowledge rows at or under ``reach`` to write; a row above it must be held
    identically already (it is then left as stored); any other row refuses the import."""
    beyond = [
        (kind, number, row)
        for kind in _KNOWLEDGE_KINDS
        for number, row in parsed.items[kind]
        if not under(row.scope, reach.key)
    ]
    if not beyond:
        return
    stored = {(kind, row.id): _comparable(row) for kind, row in await _knowledge_items(store, reach.key)}
    for kind, number, row in beyond:
        if not reach.sees(row.scope):
            raise KnowledgeReachError(
                number, f"knowledge row '{row.id}' at '{row.scope}' lies outside '{reach.key}'"
            )
        if stored.get((kind, row.id)) != _comparable(row):
            raise KnowledgeReachError(
                number,
                f"knowledge row '{row.id}' at '{row.scope}' lies above '{reach.key}' and the store does not "
                f"hold it as the export does; this import writes only at '{reach.key}' and below, and takes "
                "rows above it only unchanged (import it with a key of that scope)",
            )
    # rows above the reach are held as they are: the restoring write never sees them
    for kind in _KNOWLEDGE_KINDS:
        parsed.items[kind] = [(n, row) for n, row in parsed.items[kind] if under(row.scope, reach.key)]


async def _check_target(store: Store, parsed: _Parsed) -> None:
    if await store.list_threads(parsed.resource_id, limit=1):
        raise ImportConflictError(f"the store already holds threads of resource '{parsed.resource_id}'")
    for _, thread in parsed.items["thread"]:
        if await store.get_thread(thread.id) is not None:
            raise ImportConflictError(f"the store already holds a thread '{thread.id}'")
    existing = await store.get_messages([m.id for _, m in parsed.items["message"]])
    if existing:
        raise ImportConflictError(f"the store already holds a message '{existing[0].id}'")
    for _, record in parsed.items["record"]:
        if await store.get_head(record.lineage) is not None or await store.get_record(record.id) is not None:
            raise ImportConflictError(f"the store already holds observations of lineage '{record.lineage}'")
    for _, memory in parsed.items["working_memory"]:
        if await store.get_working_memory(memory.key) is not None:
            raise ImportConflictError(f"the store already holds working memory '{memory.key}'")


def _without_seqs(messages: list[Message]) -> list[Message]:
    return [m.model_copy(update={"seq": None}) for m in messages]


async def _save_messages(store: Store, messages: list[Message]) -> _SeqMap:
    """Save in exported order, one batch per run of one thread's messages; the old→new seq map."""
    old: list[int] = []
    new: list[int] = []
    start = 0
    while start < len(messages):
        end = start
        while end < len(messages) and messages[end].thread_id == messages[start].thread_id:
            end += 1
        batch = messages[start:end]
        thread_id = batch[0].thread_id
        assert thread_id is not None
        fresh = await asyncio.to_thread(_without_seqs, batch)  # a copy of each: a thread's thousands off the loop
        # The messages as exported, into a thread the import made: one a forget rewrote (its id
        # among the thread's forgotten ids, which travel with it) is stored as any other.
        with rewriting():
            stored = await store.save_messages(thread_id, fresh)
        if len(stored) != len(batch):  # a store that left some out: the seq map would not hold
            raise StorageError(
                f"The store kept {len(stored)} of {len(batch)} messages of thread '{thread_id}' during the "
                "import."
            )
        old.extend(m.seq or 0 for m in batch)
        new.extend(m.seq or 0 for m in stored)
        start = end
    return _SeqMap(old=old, new=new)


def _applied(result: Any, record: ObservationRecord) -> ObservationRecord:
    if not result.applied or result.record is None:
        raise StorageError(
            f"The store refused observation record '{record.id}' ({result.status}) during the import; "
            "another writer is using this resource. Import into a store nothing else writes to."
        )
    stored: ObservationRecord = result.record
    return stored


async def _write_lineage(store: Store, chain: list[ObservationRecord]) -> None:
    """Rebuild a lineage generation by generation, each reaching its exported version.

    The contract sets a successor's version to 1 and bumps a retired one by 1, so each
    generation is brought to (its exported version − 1 if retired) by compare-and-set writes
    of its own content before its successor retires it.
    """
    previous: ObservationRecord | None = None
    for record in chain:
        target = record.version - 1 if not record.is_live else record.version
        live = record.model_copy(update={"superseded_by": None})
        if previous is None:
            stored = _applied(await store.create_record(live.model_copy(update={"version": target})), record)
        else:
            result = await store.create_generation(previous, live, expected_version=previous.version)
            stored = _applied(result, record)
        while stored.version < target:
            result = await store.update_record(live, expected_version=stored.version)
            stored = _applied(result, record)
        previous = stored


async def import_resource(
    store: Store,
    source: TextIO | Iterable[str] | str | os.PathLike[str],
    *,
    knowledge: Knowledge | KnowledgeStore | None = None,
    into_resource: str | None = None,
    knowledge_reach: str | None = None,
) -> ImportSummary:
    """Read an export written by :func:`export_resource` into ``store``.

    ``source``: a text stream, lines, or a file path. ``into_resource``: import under another
    resource id (thread and message ids stay, so the target must not hold them).
    ``knowledge_reach``: the knowledge scope the caller may write (see the module docs); a row
    beyond it → :class:`KnowledgeReachError`, before anything is written.

    Nothing is written unless the whole file is valid and the target holds none of it:
    a malformed line → :class:`ExportFormatError` naming the line; an unknown format version →
    :class:`ExportVersionError`; a target that already holds the resource, one of its threads,
    messages, lineages or working memories, or whose delete of the resource is under way or was
    cut off midway (``Memory.unfinished_deletes``) → :class:`ImportConflictError` (so importing
    twice is refused), or that another import of the resource is under way (it holds the
    resource's import lease while it runs; a killed one's is taken over at once on its machine). Knowledge lines are skipped without ``knowledge`` (see :attr:`ImportSummary.skipped`);
    with it, they are written last, exactly (see the module docs); a knowledge row of the
    resource's scope that the knowledge store already holds → :class:`ImportConflictError`.
    With ``knowledge``, what holds a value forgotten there after the export is left out (see the
    module docs and :attr:`ImportSummary.forgotten`); a forget landing during the import →
    :class:`~obsmem.errors.TombstonedValueError`, nothing written. An import that fails or is
    interrupted (a cancelled task, Ctrl-C) once it began writing takes back what it wrote.
    """
    with _reader(source) as lines:
        # read, validated and checked in a thread (its lines one by one, as before): 20,000
        # messages held the event loop about 0.5 s
        parsed = await asyncio.to_thread(_parse, lines)
    parsed.items["record"] = [(n, _record_as_data(r)) for n, r in parsed.items["record"]]
    if into_resource is not None:
        if not isinstance(into_resource, str) or not into_resource.strip():
            raise InvalidInputError("into_resource must be a non-empty string.", argument="into_resource")
        _rename(parsed, into_resource)
    items = parsed.items
    knowledge_found = {kind: len(items[kind]) for kind in _KNOWLEDGE_KINDS if items[kind]}
    knowledge_store = _knowledge_store(knowledge)
    summary = ImportSummary(resource_id=parsed.resource_id)
    if knowledge_store is not None:
        # A forget after the export: its value stays out (before the reach check, so a row the
        # forget removed from the store is not taken for a changed one).
        forgotten = await _forgotten_values(knowledge_store, parsed)
        if forgotten.values:
            # off the loop: one hash per character of every text, per distinct length of the values
            await asyncio.to_thread(_leave_out_forgotten, parsed, forgotten)
            summary.forgotten = forgotten.counts
            for kind in _KNOWLEDGE_KINDS:
                left = knowledge_found.get(kind, 0) - forgotten.counts.get(kind, 0)
                if left > 0:
                    knowledge_found[kind] = left
                else:
                    knowledge_found.pop(kind, None)
    if knowledge_reach is not None and knowledge_store is not None and parsed.knowledge_scope is not None:
        await _confine_knowledge(parsed, knowledge_store, Scope.parse(knowledge_reach))
    # One import of a resource at a time: a second one (a retried request, a second click) would
    # take the first one's writes for its own, or for a cut-off import's, and take them back.
    async with _import_claim(store, parsed.resource_id):
        erasing = await _erasing_thread(store, parsed.resource_id)
        if erasing is not None:  # the rest of it is still to delete, and finishing that would take this too
            raise ImportConflictError(
                f"a delete of resource '{parsed.resource_id}' (its thread '{erasing}') is under way or was cut off "
                f"midway ({_FINISH_DELETE})"
            )
        await _take_back_cut_off(store, parsed)
        await _check_target(store, parsed)

        written = _Written()
        # An import under way is noted (storage.notes) before its first write, until it is done: one
        # whose process died midway leaves it, and the next import of the resource takes that back.
        note = import_note(parsed.resource_id)
        await store.set_working_memory(note, json.dumps({  # what it will write, kept until it is done
            "threads": [t.id for _, t in items["thread"]],
            "lineages": sorted({r.lineage for _, r in items["record"]}),
            "working_memory": [w.key for _, w in items["working_memory"]],
        }))
        try:
            await _write_memory(store, items, summary, written)
            if knowledge_found and knowledge_store is not None and parsed.knowledge_scope is not None:
                dump = KnowledgeDump(
                    nodes=[row for _, row in items["knowledge_node"]],
                    records=[row for _, row in items["knowledge_record"]],
                    tombstones=[row for _, row in items["knowledge_tombstone"]],
                    forgotten=[row for _, row in items["knowledge_forgotten"]],
                    events=[row for _, row in items["knowledge_activity"]],
                )
                # Last, and in one transaction: a conflict here leaves the knowledge store untouched,
                # and the memory written above is taken back.
                await knowledge_store.restore_dump(dump, subtree=parsed.knowledge_scope)
                summary.counts.update(knowledge_found)
            else:
                summary.skipped = knowledge_found
        except BaseException:  # a failure or an interruption (Ctrl-C, a cancelled task): all or nothing
            undo = run_to_end(_take_back(store, written, note=note))  # a task of its own: a cancel scope's next
            with contextlib.suppress(asyncio.CancelledError):  # cancellation does not stop it midway
                await asyncio.shield(undo)
            raise
        await store.delete_working_memory(note)
        return summary


_IMPORT_LEASE = "importing:"
_IMPORT_LEASE_TTL_S = 30.0


@contextlib.asynccontextmanager
async def _import_claim(store: Store, resource_id: str) -> AsyncIterator[None]:
    """The body under the resource's import lease (renewed while it runs, released at its end);
    :class:`ImportConflictError` when another import of the resource holds it."""
    clock = SystemClock()
    # (the id hashed, as an erase's lease: a lease a killed import left, expired, names no user)
    key = _IMPORT_LEASE + hashlib.sha256(resource_id.encode("utf-8", "surrogatepass")).hexdigest()
    owner = process_owner(f"import {secrets.token_hex(6)}")
    taken = await acquired(store, key, owner, ttl_s=_IMPORT_LEASE_TTL_S, clock=clock)
    if not taken:
        held = await store.get_lease(key)
        if held is None or (ended_here(held.owner) and await store.release_lease(key, held.owner)):
            taken = await acquired(store, key, owner, ttl_s=_IMPORT_LEASE_TTL_S, clock=clock)
    if not taken:
        raise ImportConflictError(
            f"an import of resource '{resource_id}' is under way (another task or process; one killed on "
            f"another machine holds it up to {_IMPORT_LEASE_TTL_S:.0f} s, then run this again)"
        )
    async with holding(store, key, owner, ttl_s=_IMPORT_LEASE_TTL_S, clock=clock):
        yield


async def _take_back_cut_off(store: Store, parsed: _Parsed) -> None:
    """What an import of this resource left when its process died midway, taken back (all or
    nothing across a crash too), unless the resource has been used since (a message in a thread
    it wrote that is not in this export, or a thread of the resource it did not write, whose
    observations may be in the resource's lineage and working memory): that is refused, naming
    the leftover import, and nothing is changed."""
    note = import_note(parsed.resource_id)
    text = await store.get_working_memory(note)
    if text is None:
        return
    try:
        data = json.loads(text)
        written = _Written(
            threads=[str(t) for t in data["threads"]],
            lineages=[str(lineage) for lineage in data["lineages"]],
            working_memory=[str(k) for k in data["working_memory"]],
        )
    except (ValueError, KeyError, TypeError):
        raise ImportConflictError(f"the store holds an unreadable note of an import ('{note}')") from None
    # A thread of the resource the cut-off import did not write is the app's, begun since: the
    # resource's lineage and working memory (noted, and taken back below) are its too.
    noted = set(written.threads)
    for thread in await _threads(store, parsed.resource_id):
        if thread.id not in noted:
            raise ImportConflictError(
                f"an import of resource '{parsed.resource_id}' was cut off midway and the resource has a "
                f"thread '{thread.id}' since (delete the resource to import it again)"
            )
    exported = {m.id for _, m in parsed.items["message"]}
    for thread_id in written.threads:
        try:
            stored = await store.list_messages(thread_id)
        except ThreadNotFoundError:
            continue
        if any(m.id not in exported for m in stored):
            raise ImportConflictError(
                f"an import of resource '{parsed.resource_id}' was cut off midway and its thread "
                f"'{thread_id}' has been used since (delete the resource to import it again)"
            )
    await _take_back(store, written, note=note)


@dataclass(slots=True)
class _Written:
    """What an import has written to the memory store so far, to take back if it cannot finish."""

    threads: list[str] = field(default_factory=list)
    lineages: list[str] = field(default_factory=list)
    working_memory: list[str] = field(default_factory=list)


async def _write_memory(
    store: Store, items: dict[str, list[Any]], summary: ImportSummary, written: _Written
) -> None:
    """The threads, messages, lineages and working memory of the export, each noted in ``written``."""
    threads = [t for _, t in items["thread"]]
    every: dict[str, list[str]] = {}  # a thread's forgotten ids past what its row keeps (see export_resource)
    for index, thread in enumerate(threads):
        ids = forgotten_id_list(thread)
        if len(ids) > MAX_FORGOTTEN_IDS:
            every[thread.id] = ids
            threads[index] = with_forgotten_id_list(thread, ids[-MAX_FORGOTTEN_IDS:])
    for thread in threads:
        written.threads.append(thread.id)  # before the write: one cut off after its commit is taken back too
        made = await store.create_thread(thread)  # (a thread of that id returned as it is, when one exists)
        if made.resource_id != thread.resource_id or made.created_at != thread.created_at:
            written.threads.pop()  # another writer's, made since the check: never taken back
            raise ImportConflictError(f"the store already holds a thread '{thread.id}'")
        if thread.id in every:  # before its messages: none of them comes back as a forgotten one's copy
            await note_forgotten_ids(store, thread.id, every[thread.id])
    seqs = await _save_messages(store, [m for _, m in items["message"]])
    summary.seqs_preserved = seqs.identity
    for thread in threads:
        mapped = seqs.thread(thread)
        if mapped is not thread:  # metadata only; the version is the exported one again after this
            stored = await store.get_thread(thread.id)
            assert stored is not None
            await store.update_thread(mapped, expected_version=stored.version)
    chains: dict[str, list[ObservationRecord]] = {}
    for _, record in items["record"]:
        chains.setdefault(record.lineage, []).append(seqs.record(record))
    for lineage, chain in chains.items():
        written.lineages.append(lineage)
        await _write_lineage(store, chain)
    for _, memory in items["working_memory"]:
        written.working_memory.append(memory.key)
        await store.set_working_memory(memory.key, memory.text)
    for kind in ("thread", "message", "record", "working_memory"):
        if items[kind]:
            summary.counts[kind] = len(items[kind])


async def _take_back(store: Store, written: _Written, *, note: str | None = None) -> None:
    """Remove what an unfinished import wrote, then its ``note`` (see :func:`~obsmem.storage.notes.import_note`). Safe:
    the target held none of it (checked before the first write). Best effort: the store may be
    what failed; its own error is the one raised."""
    undo: list[Callable[[], Awaitable[object]]] = [
        *(partial(store.delete_working_memory, key) for key in written.working_memory),
        *(partial(store.delete_lineage, lineage) for lineage in written.lineages),
        *(partial(store.delete_thread, thread_id) for thread_id in written.threads),
        *((partial(store.delete_working_memory, note),) if note is not None else ()),
    ]
    for step in undo:
        with contextlib.suppress(Exception):
            await step()
