"""Receipts: what memory a context was made of, kept so an answer can be traced back later.

Every context obsmem builds carries a :class:`Receipt`: the generation (record id and number)
whose observations it showed, the observation groups shown with the message range each covers,
the raw messages of the tail, the knowledge records and pins added, the tokens of each section
and a SHA-256 hash of the rendered messages. A turn stores the receipt its reply was made from
on the reply (``metadata["obsmem_receipt"]``), so "which memory produced this answer" can be
asked long after: groups name their thread and ``seq`` span, raw messages are never deleted by
memory work and older generations are kept, so an old receipt resolves after any number of
later reflections (:func:`resolve_groups`).

Groups: in retrieval mode the stored observations carry provenance groups (one per observation
cycle, merged by reflection), and the receipt lists those it showed. Without retrieval mode
observations carry no finer provenance than each thread's observation cursor, so the receipt
has one ``coverage`` group per thread shown, covering that thread's messages up to its cursor.

A receipt holds ids, numbers and a hash, never message text.
"""

from __future__ import annotations

import functools
import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from obsmem.om.sections import visible_sections
from obsmem.om.text.groups import parse_groups
from obsmem.om.text.own import MARKER_KEY
from obsmem.storage.contract import ObservationRecord, Store
from obsmem.storage.rules import RECEIPT_KEY as _STORED_KEY, receipt_without_threads
from obsmem.tokens import TOKENS_PER_CONVERSATION, TokenCounter
from obsmem.types import LONG_TEXT_CHARS, DataPart, Message, TextPart, text_digest

__all__ = [
    "RECEIPT_KEY",
    "Receipt",
    "ReceiptGroup",
    "context_hash",
    "forget_groups",
    "message_digest",
    "raw_ids_and_span",
    "raw_span",
    "receipt_groups",
    "receipt_without_thread",
    "resolve_groups",
    "resolve_raw",
]

#: Where a reply stores the receipt of the context it was made from: ``metadata[RECEIPT_KEY]``.
RECEIPT_KEY = _STORED_KEY  # "obsmem_receipt" (the stores read it too: storage.rules)

GroupKind = Literal["observation", "reflection", "coverage"]


@dataclass(frozen=True, slots=True)
class ReceiptGroup:
    """Observations shown, and the conversation messages of ``thread_id`` they were made from:
    those with ``first_seq <= seq <= last_seq`` (system messages never are)."""

    id: str
    thread_id: str
    first_seq: int
    last_seq: int
    kind: GroupKind = "observation"

    def data(self) -> list[Any]:
        return [self.id, self.thread_id, self.first_seq, self.last_seq, self.kind]

    @staticmethod
    def from_data(data: Sequence[Any]) -> ReceiptGroup:
        kind = str(data[4]) if len(data) > 4 else "observation"
        return ReceiptGroup(
            str(data[0]), str(data[1]), int(data[2]), int(data[3]),
            kind if kind in ("observation", "reflection", "coverage") else "observation",  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True)
class Receipt:
    """What one context was made of (see the module docstring). ``id`` is the first 16 hex digits
    of ``context_hash``: two contexts with the same receipt id showed the model the same messages."""

    thread_id: str | None
    context_hash: str
    record_id: str | None = None
    generation: int | None = None
    groups: tuple[ReceiptGroup, ...] = ()
    raw_message_ids: tuple[str, ...] = ()
    #: The raw tail as (thread id, first seq, last seq), when it is one span of one thread.
    raw_span: tuple[str, int, int] | None = None
    #: Raw message ids shown outside ``raw_span`` (the turn's question shown again in a tool loop).
    raw_outside: tuple[str, ...] = ()
    knowledge_record_ids: tuple[str, ...] = ()
    pin_ids: tuple[str, ...] = ()
    section_tokens: Mapping[str, int] = field(default_factory=dict)
    created_at: datetime | None = None

    @property
    def id(self) -> str:
        return self.context_hash[:16]

    #: Stored receipts list raw message ids only up to this many; a longer tail is kept as its span.
    MAX_STORED_RAW_IDS = 32

    @property
    def total_tokens(self) -> int:
        """The sections' tokens plus the conversation's own overhead: the whole context's count."""
        return sum(self.section_tokens.values()) + (TOKENS_PER_CONVERSATION if self.section_tokens else 0)

    def revised(
        self,
        messages: Sequence[Message],
        raw_messages: Sequence[Message],
        *,
        counter: TokenCounter | None = None,
        added: Sequence[Message] = (),
        knowledge_record_ids: Sequence[str] | None = None,
        pin_ids: Sequence[str] | None = None,
    ) -> Receipt:
        """This receipt for a context changed after it was built (the turn's input shown again,
        knowledge blocks added): the hash and raw ids follow ``messages`` / ``raw_messages``;
        with ``counter`` the raw tail is counted again and ``added`` messages count as ``knowledge``."""
        tokens = dict(self.section_tokens)
        if counter is not None and tokens:
            tokens["raw"] = sum(counter.count_message(m) for m in raw_messages)
            if added:
                tokens["knowledge"] = tokens.get("knowledge", 0) + sum(counter.count_message(m) for m in added)
        outside, shown = set(self.raw_outside), set(self.raw_message_ids)  # one lookup per message
        return replace(
            self,
            context_hash=context_hash(messages),
            raw_message_ids=tuple(m.id for m in raw_messages if MARKER_KEY not in m.metadata),
            raw_outside=tuple(
                m.id for m in raw_messages
                if MARKER_KEY not in m.metadata and (m.id in outside or m.id not in shown)
            ),
            knowledge_record_ids=self.knowledge_record_ids if knowledge_record_ids is None else tuple(knowledge_record_ids),
            pin_ids=self.pin_ids if pin_ids is None else tuple(pin_ids),
            section_tokens=tokens,
        )

    def data(self) -> dict[str, Any]:
        """The receipt as JSON-ready data (what a reply stores under :data:`RECEIPT_KEY`)."""
        return {
            "v": 1,
            "id": self.id,
            "thread_id": self.thread_id,
            "hash": self.context_hash,
            "record_id": self.record_id,
            "generation": self.generation,
            "groups": [g.data() for g in self.groups],
            "raw": list(self.raw_message_ids)
            if self.raw_span is None or len(self.raw_message_ids) <= self.MAX_STORED_RAW_IDS
            else [],
            "raw_span": list(self.raw_span) if self.raw_span is not None else None,
            "raw_outside": list(self.raw_outside),
            "raw_count": len(self.raw_message_ids),
            "knowledge": list(self.knowledge_record_ids),
            "pins": list(self.pin_ids),
            "tokens": dict(self.section_tokens),
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }

    @staticmethod
    def from_data(data: Mapping[str, Any]) -> Receipt:
        created = data.get("created_at")
        return Receipt(
            thread_id=data.get("thread_id"),
            context_hash=str(data["hash"]),
            record_id=data.get("record_id"),
            generation=data.get("generation"),
            groups=tuple(ReceiptGroup.from_data(g) for g in data.get("groups", ())),
            raw_message_ids=tuple(str(i) for i in data.get("raw", ())),
            raw_span=_span(data.get("raw_span")),
            raw_outside=tuple(str(i) for i in data.get("raw_outside", ())),
            knowledge_record_ids=tuple(str(i) for i in data.get("knowledge", ())),
            pin_ids=tuple(str(i) for i in data.get("pins", ())),
            section_tokens={str(k): int(v) for k, v in dict(data.get("tokens", {})).items()},
            created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
        )


def _span(value: Any) -> tuple[str, int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 3:
        return str(value[0]), int(value[1]), int(value[2])
    return None


def raw_span(raw: Sequence[Message]) -> tuple[str, int, int] | None:
    """(thread, first seq, last seq) of a raw tail that is one thread's stored messages, else None."""
    return raw_ids_and_span(raw)[1]


def raw_ids_and_span(raw: Sequence[Message]) -> tuple[tuple[str, ...], tuple[str, int, int] | None]:
    """The ids of the stored messages a raw tail shows (not obsmem's reminders, which carry the
    marker) and :func:`raw_span`: the thread and the lowest and highest seq when every shown
    message has a seq and all are of one thread, else None. One pass: read for every context."""
    ids: list[str] = []
    thread: str | None = None
    low = high = 0
    spanned = True
    first = True
    for message in raw:
        if MARKER_KEY in message.metadata:
            continue
        ids.append(message.id)
        if not spanned:
            continue
        seq = message.seq
        if seq is None:
            spanned = False
        elif first:
            thread, low, high, first = message.thread_id, seq, seq, False
        elif message.thread_id != thread:
            spanned = False
        elif seq < low:
            low = seq
        elif seq > high:
            high = seq
    span = (thread, low, high) if spanned and ids and thread is not None else None
    return tuple(ids), span


def context_hash(messages: Iterable[Message]) -> str:
    """SHA-256 over what a model is shown of ``messages`` (the digest of each message's role and
    parts, not ids, timestamps or metadata: :func:`message_digest`), so equal hashes mean the
    model saw the same thing."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message_digest(message))
    return digest.hexdigest()


#: Where a message keeps its digest (not a field; see ``TokenCounter._parts_cost``).
_DIGEST_KEY = "_obsmem_digest"


def message_digest(message: Message) -> bytes:
    """SHA-256 of a message's role and parts. A message keeps it on itself (valid while its
    parts tuple is the same object, which copies share; a message's parts are values, see
    :class:`~obsmem.types.Message`): the observation messages every step shows, and the tool
    calls and results of a tool loop's window, are hashed once, not dumped to JSON again at
    every boundary."""
    parts = message.parts
    memo = message.__dict__.get(_DIGEST_KEY)
    if memo is not None and memo[0] is parts and memo[1] == message.role:
        return bytes(memo[2])
    digest = hashlib.sha256(b"\x1emessage\x1f" + message.role.encode())
    for part in parts:
        if isinstance(part, TextPart) and len(part.text) >= LONG_TEXT_CHARS:
            digest.update(b"\x1flong-text\x1f" + text_digest(part))  # hashed once per part (kept on it)
        elif isinstance(part, TextPart):  # the common case, without a JSON dump
            digest.update(b"\x1ftext\x1f" + part.text.encode("utf-8", "surrogatepass"))
        else:
            digest.update(b"\x1f" + part.model_dump_json().encode())
    value = digest.digest()
    message.__dict__[_DIGEST_KEY] = (parts, message.role, value)
    return value


@functools.lru_cache(maxsize=64)
def _groups(visible: str) -> tuple[ReceiptGroup, ...]:
    """The groups of the observations ``visible``, kept for the newest 64 texts: every step's
    receipt lists them, and the text changes only when memory works."""
    return tuple(ReceiptGroup(g.id, g.thread_id, g.first_seq, g.last_seq, g.kind) for g in parse_groups(visible))


def receipt_without_thread(data: object, thread_id: str) -> dict[str, Any] | None:
    """A stored receipt (``metadata[RECEIPT_KEY]`` of another thread's reply) without what names
    ``thread_id``, a thread deleted since: its groups of that thread and a raw span of it (the
    rest, its hash included, as it was). None when it names none of it, or is not a receipt."""
    return receipt_without_threads(data, {thread_id})


def forget_groups() -> None:
    """Drop the kept groups (after a delete: no observation text stays in memory here)."""
    _groups.cache_clear()


def receipt_groups(record: ObservationRecord | None, thread_id: str | None, *, shared: bool) -> tuple[ReceiptGroup, ...]:
    """The groups of ``record``'s observations that ``thread_id``'s context shows (see module docstring)."""
    if record is None or not record.active_observations.strip():
        return ()
    visible = record.active_observations
    if record.scope == "resource":
        visible = visible_sections(visible, thread_id, shared=shared)
    groups = _groups(visible)
    if groups:
        return groups
    shown = record.threads if shared or record.scope == "thread" else {
        key: state for key, state in record.threads.items() if key == thread_id
    }
    return tuple(
        ReceiptGroup(f"{record.id}:{key}", key, 1, state.cursor, "coverage")
        for key, state in sorted(shown.items())
        if state.cursor > 0
    )


def is_conversation(message: Message) -> bool:
    """Whether ``message`` is one a group can cover: not a system message, not one of obsmem's,
    not one of nothing but data parts (markers)."""
    return (
        message.role != "system"
        and not isinstance(message.metadata.get(MARKER_KEY), str)
        and any(not isinstance(part, DataPart) for part in message.parts)
    )


async def resolve_raw(store: Store, receipt: Receipt) -> list[Message]:
    """The raw tail's messages as stored (by id, or from the span a long tail is stored as)."""
    if receipt.raw_message_ids:
        return await store.get_messages(list(receipt.raw_message_ids))
    outside = await store.get_messages(list(receipt.raw_outside)) if receipt.raw_outside else []
    if receipt.raw_span is None:
        return outside
    thread_id, first, last = receipt.raw_span
    if await store.get_thread(thread_id) is None:
        return outside
    inside = await store.list_messages(thread_id, after_seq=first - 1, before_seq=last + 1)
    return sorted([*outside, *(m for m in inside if is_conversation(m))], key=lambda m: m.seq or 0)


async def resolve_groups(store: Store, receipt: Receipt, *, per_group: int | None = None) -> dict[str, list[Message]]:
    """Each group of ``receipt`` (by id) with the stored messages it covers, in seq order (with
    ``per_group``, only the first messages of each group's span: reflection groups may span
    most of a thread, and a receipt shows dozens of them).

    A group of a deleted thread resolves to no messages. With ``per_group`` it reads one short
    page per group; without it, each thread's messages under the union of its groups' spans
    once (groups that overlap share the message objects), so the work is linear in the messages
    covered however the spans overlap.
    """
    resolved: dict[str, list[Message]] = {}
    threads: dict[str, bool] = {}
    for thread_id in dict.fromkeys(g.thread_id for g in receipt.groups):
        threads[thread_id] = await store.get_thread(thread_id) is not None
    if per_group is not None:
        for group in receipt.groups:
            if not threads[group.thread_id]:
                resolved[group.id] = []
                continue
            messages = await store.list_messages(
                group.thread_id, after_seq=group.first_seq - 1, before_seq=group.last_seq + 1, limit=per_group
            )
            resolved[group.id] = [m for m in messages if is_conversation(m)]
        return resolved
    for thread_id, alive in threads.items():
        groups = [g for g in receipt.groups if g.thread_id == thread_id]
        if not alive:
            resolved.update((g.id, []) for g in groups)
            continue
        covered: list[Message] = []
        for first, last in _union(sorted((g.first_seq, g.last_seq) for g in groups)):
            page = await store.list_messages(thread_id, after_seq=first - 1, before_seq=last + 1)
            covered.extend(m for m in page if is_conversation(m))
        seqs = [m.seq or 0 for m in covered]
        for group in groups:
            resolved[group.id] = covered[bisect_left(seqs, group.first_seq) : bisect_right(seqs, group.last_seq)]
    return {group.id: resolved[group.id] for group in receipt.groups}


def _union(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted (first, last) spans merged where they overlap or touch."""
    merged: list[tuple[int, int]] = []
    for first, last in spans:
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged
