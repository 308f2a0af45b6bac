"""A bounded cache of decoded message rows, keyed by the row's full stored content.

Decoding a stored message (JSON text to validated pydantic models) is the main cost of reading
a raw tail, and a turn reads the same tail several times. The SQL stores therefore remember the
message each row decoded to, keyed by *everything* the row holds (seq, id, thread, role, the
parts and metadata text, created_at, resource): a cached message is a pure function of its key,
so any change to a row (an upsert with new parts or metadata, a move, a rewrite by another
process) is simply a miss, and a rolled-back write can leave nothing wrong behind.

Sharing is safe only for what nobody can change. :class:`~obsmem.types.Message` and its parts
are frozen models, but ``Message.metadata`` and some part fields (tool-call ``args``, a tool
result, ``DataPart.data``) are plain dicts a caller could mutate. So:

* only messages whose every part is immutable in fact are cached (text, reasoning and file
  parts; tool calls whose ``args`` is a string; tool results whose ``result`` is a string,
  integer, bool or None); the others are decoded afresh on every read;
* every hit returns a new :class:`Message` with a new ``metadata`` dict decoded from the stored
  text, so no two readers ever hold the same mutable object.

Bounded by entries and by stored characters; least recently used goes first. One cache per
store object, used from its worker thread and the event loop (SQLite's inline reads) or the
event loop alone (PostgreSQL); a lock keeps the table and its size consistent.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from obsmem.types import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["LONG_ROW_CHARS", "DecodedMessages", "LongRows", "shareable"]

CAPACITY = 32_768  # messages (about 45 MB of small ones at most): a long unobserved window read at
# every boundary must fit, or each read evicts what the next needs (a cyclic scan defeats LRU)
MAX_CHARS = 16_000_000  # stored characters held, all entries together (tens of MB at most)
_EMPTY = "{}"
_SCALARS = (type(None), str, int, bool)  # no float: inf and nan do not survive JSON


def shareable(message: Message) -> bool:
    """Whether every part of ``message`` is immutable in fact (so it may be shared)."""
    for part in message.parts:
        if isinstance(part, TextPart | ReasoningPart | FilePart):
            continue
        if isinstance(part, ToolCallPart) and isinstance(part.args, str):
            continue
        if isinstance(part, ToolResultPart):
            result = part.result
            if type(result) in _SCALARS:
                continue
        return False
    return True


class _Kept:
    """What both caches share: entries by key, least recently used first, each with its size in
    stored characters; bounded by ``capacity`` entries and ``max_chars`` characters. One lock
    keeps the table and its size consistent (a store uses its cache from the event loop and its
    worker threads)."""

    def __init__(self, *, capacity: int | None, max_chars: int) -> None:
        self._capacity = capacity
        self._max_chars = max_chars
        self._entries: dict[tuple[Any, ...], tuple[int, Any]] = {}  # key -> (size, kept)
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _peek(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def _take(self, key: tuple[Any, ...]) -> Any:
        """What is kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return None
            self._entries[key] = entry
        return entry[1]

    def _keep(self, key: tuple[Any, ...], kept: Any, size: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= old[0]
            self._entries[key] = (size, kept)
            self._chars += size
            while self._entries and (
                (self._capacity is not None and len(self._entries) > self._capacity) or self._chars > self._max_chars
            ):
                oldest = next(iter(self._entries))
                self._chars -= self._entries.pop(oldest)[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


def _copy(message: Message, metadata: str) -> Message:
    """A new message of what is kept, with its own metadata decoded from the stored text."""
    return message.model_copy(update={"metadata": {} if metadata == _EMPTY else json.loads(metadata)})


class DecodedMessages(_Kept):
    """Row content → decoded message; see the module docstring for what is shared."""

    def __init__(self, *, capacity: int = CAPACITY, max_chars: int = MAX_CHARS) -> None:
        super().__init__(capacity=capacity, max_chars=max_chars)

    def get(self, key: tuple[Any, ...]) -> Message | None:
        """A fresh copy of the message ``key`` decoded to, or None when not remembered."""
        kept = self._take(key)
        return None if kept is None else _copy(*kept)

    def put(self, key: tuple[Any, ...], message: Message, metadata: str) -> None:
        """Remember that ``key`` decodes to ``message`` (whose metadata is stored as ``metadata``).

        ``message`` must equal what decoding ``key`` gives; it is kept only when shareable, and
        the cache keeps its own metadata (the text), never ``message.metadata`` itself.
        """
        if not shareable(message):
            return
        size = sum(len(v) for v in key if isinstance(v, str))
        if size > self._max_chars // 64:  # one huge row would push out everything else
            return
        self._keep(key, (message.model_copy(update={"metadata": {}}), metadata), size)


#: A stored row at least this long (characters of its document) is a *long row*: decoding it is
#: linear in its text (JSON, then hashing and searching a pasted log), so it is decoded off the
#: event loop and kept by :class:`LongRows` instead of :class:`DecodedMessages` (which hashes its
#: whole key on every lookup and keeps no row above a 64th of its budget).
LONG_ROW_CHARS = 32_768
LONG_ROWS_MAX_CHARS = 16_000_000  # stored characters of long rows held, all entries together


class LongRows(_Kept):
    """Long stored rows (see :data:`LONG_ROW_CHARS`) → the message each decoded to, by the row's
    other columns (seq, thread, resource: small, and a seq is never reused): a store without
    window marks (PostgreSQL) reads a thread's window at every boundary, and a pasted
    multi-megabyte log waiting in it was decoded, hashed and searched again each time on the
    event loop. A hit needs the row to be the same in full: the same document text (compared,
    never hashed: a comparison of equal texts is a memory compare, and any change is a miss).
    What is shared follows :class:`DecodedMessages`: only shareable messages are kept, and every
    hit is a new message with its own metadata decoded from the stored text; the parts are
    shared, with what they keep worked out (:func:`~obsmem.types.long_texts`). Bounded by stored
    characters, least recently used first.
    """

    def __init__(self, *, max_chars: int = LONG_ROWS_MAX_CHARS) -> None:
        super().__init__(capacity=None, max_chars=max_chars)

    def holds(self, columns: tuple[Any, ...], doc: str) -> bool:
        """Whether :meth:`get` would find the row."""
        kept = self._peek(columns)
        return kept is not None and kept[0] == doc

    def get(self, columns: tuple[Any, ...], doc: str) -> Message | None:
        """A fresh copy of what the row (``columns`` besides its ``doc``) decoded to, or None."""
        kept = self._take(columns)
        if kept is None or kept[0] != doc:
            return None
        return _copy(kept[1], kept[2])

    def put(self, columns: tuple[Any, ...], doc: str, message: Message, metadata: str) -> None:
        """Remember that the row decodes to ``message`` (kept only when shareable and when it
        fits a quarter of the budget)."""
        size = len(doc)
        if not shareable(message) or size > self._max_chars // 4:
            return
        self._keep(columns, (doc, message.model_copy(update={"metadata": {}}), metadata), size)
