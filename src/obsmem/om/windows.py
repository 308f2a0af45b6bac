"""Threads' windows kept between reads, each valid for exactly one store mark.

A turn reads its thread's *window* (the live head and the messages after the thread's cursor)
at every boundary. Most boundaries find it as the last one left it, plus the messages the turn
saved itself; reading and decoding it again is most of a quiet boundary's cost. Where the store
can mark its windows (:data:`~obsmem.storage.contract.WindowMark`: the thread's row, its message
revision, bumped by every write or delete of one of its messages by any process, and the head's
id and version), an engine keeps the window it last read or wrote with its mark:

* :meth:`Windows.read` reads the mark (one row) and returns the kept window when the mark is the
  same, else reads the window and its mark in one snapshot;
* :meth:`Windows.save` saves messages and gets the marks just before and after the save in its
  transaction: when the mark before is the kept one, nothing else changed the window, so the kept
  window plus what was saved (after the cursor) *is* the window at the mark after, with no read.

Nothing here decides anything: equal marks prove the store holds what is kept, any other
mark is a read. So this is a cache, not a lock: several engines, in one process or many, may
share a store, and each keeps its own. A store without marks (PostgreSQL, memory) reads every
time, as before.

Kept messages are shared by the contexts built from them, so they are made read-only in full:
besides the frozen models, their ``metadata``, tool-call arguments, tool results and data parts
are read-only dicts and lists (changing one raises ``TypeError``; ``model_copy(deep=True)`` gives
a plain, changeable copy). Only messages as the store returns them are kept (a save keeps the
rows it wrote, decoded, never the caller's objects). Bounded by windows, by messages and by
characters (a window's head counts too: a thread whose messages are all observed keeps no
message, but its head holds every observation).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from obsmem.storage.contract import (
    ObservationRecord,
    Store,
    WindowMark,
    add_parts_marked,
    read_marked_window,
    save_marked_early,
    window_mark,
)
from obsmem.errors import ThreadNotFoundError
from obsmem.om.selection import observable_messages
from obsmem.types import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["ReadOnlyDict", "ReadOnlyList", "Recent", "Saved", "Window", "Windows", "extended"]

Window = tuple[ObservationRecord | None, list[Message]]

CAPACITY = 16_384  # windows, and messages in all kept windows; the least recently used window goes first
MAX_CHARS = 16_000_000  # characters of content in all kept windows (tens of MB at most)
MAX_MESSAGES = 8_192  # a longer window is not kept (read afresh); message_tokens keeps most below it
MAX_WINDOW_CHARS = MAX_CHARS // 2  # nor a window this large (a pasted log waiting is kept: not decoded at every boundary)
#: Windows read whole and found longer than MAX_MESSAGES that are remembered (their size, not
#: their messages), so that their newest messages can be read alone (:meth:`Windows.read_recent`).
MAX_LARGE = 1_024
#: The first read of a large window's newest messages; each further read takes four times as many.
RECENT_FIRST = 256
#: The most system messages (and their characters) of a large window remembered with its size.
MAX_SYSTEMS = 32
MAX_SYSTEMS_CHARS = 64_000


@dataclass(frozen=True, slots=True)
class Saved:
    """What :meth:`Windows.save` did."""

    #: The messages as stored.
    messages: list[Message]
    #: The window just after the save when it is known without a read (the kept window was
    #: current just before it), else None.
    window: Window | None
    #: The save's commit, to await before anything is written from what was saved or it is
    #: handed out as stored.
    commit: Callable[[], Awaitable[None]]
    #: Whether the kept window had changed since it was kept (another writer's message, say):
    #: a window the caller read before the save is stale then.
    stale: bool


@dataclass(frozen=True, slots=True)
class Recent:
    """The newest messages of a window too long to keep (:meth:`Windows.read_recent`)."""

    #: The live head they were read under (None: none yet).
    head: ObservationRecord | None
    #: The window's newest messages, by seq, as stored: those after the head's cursor from some
    #: message on, to the newest.
    messages: list[Message]
    #: How many messages of the window that say something (neither system nor marker-only
    #: messages) come before them, unread: counted when the window was last read whole, less
    #: those read again here. Messages of them deleted or rewritten by another process since
    #: are not seen: the count is the window's as this engine last read it.
    older: int
    #: Whether ``messages`` are the whole window (it had grown shorter than the first read).
    whole: bool
    #: As ``older``, counting every message before them but system messages (a window cut as
    #: stored, ``Memory.get_context``'s, counts marker-only messages it leaves out too).
    older_stored: int = 0
    #: The system messages before them, unread (the application's instructions, which a cut of
    #: the window as stored keeps wherever they are), as the window was last read whole; None
    #: when there were too many to remember (:data:`MAX_SYSTEMS`): such a cut reads it whole.
    systems: tuple[Message, ...] | None = ()


@dataclass(frozen=True, slots=True)
class _Large:
    """A window too long to keep, as last read whole (see :meth:`Windows.read_recent`)."""

    cursor: int  # the thread's cursor then
    observable: int  # how many of its messages carry conversation (observable_messages)
    stored: int  # how many are not system messages
    newest: int  # its newest seq
    systems: tuple[Message, ...] | None  # its system messages (None: more than MAX_SYSTEMS)


def _remembered(cursor: int, messages: Sequence[Message]) -> _Large:
    systems = tuple(m for m in messages if m.role == "system")
    remembered = len(systems) <= MAX_SYSTEMS and sum(len(m.text) for m in systems) <= MAX_SYSTEMS_CHARS
    return _Large(cursor, len(observable_messages(messages)), len(messages) - len(systems),
                  messages[-1].seq or 0 if messages else 0, systems if remembered else None)  # fmt: skip


class Windows:
    """The windows one engine read or wrote last, by (lineage, thread)."""

    def __init__(self, store: Store, *, capacity: int = CAPACITY, max_chars: int = MAX_CHARS) -> None:
        """``capacity``: messages in all kept windows together; ``max_chars``: their characters."""
        self._store = store
        self._capacity = capacity
        self._max_chars = max_chars
        self._kept: OrderedDict[tuple[str, str], tuple[WindowMark, Window, int]] = OrderedDict()
        self._messages = 0  # in all kept windows
        self._chars = 0
        self._threads: dict[str, set[str]] = {}  # lineage -> the threads whose windows are kept
        # Windows too long to keep, as last read whole: (the thread's cursor then, how many of
        # their messages say something, the newest seq then); see read_recent.
        self._large: OrderedDict[tuple[str, str], _Large] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    async def read(self, lineage: str, thread_id: str) -> Window:
        """The window as stored now: the kept one when its mark still holds, else read."""
        key = (lineage, thread_id)
        kept = self._kept.get(key)
        if kept is not None:
            if await window_mark(self._store, lineage, thread_id) == kept[0]:
                self._kept.move_to_end(key)
                head, messages = kept[1]
                return head, list(messages)
            self._drop(key)  # stale (or its thread is gone): none of it stays
        try:
            head, messages, mark = await read_marked_window(self._store, lineage, thread_id)
        except ThreadNotFoundError:
            self._drop(key)
            self._large.pop(key, None)
            raise
        self._keep(key, mark, (head, messages))
        self._large.pop(key, None)
        if len(messages) > MAX_MESSAGES:
            self._large[key] = _remembered(head.cursor(thread_id) if head else 0, messages)
            while len(self._large) > MAX_LARGE:
                self._large.popitem(last=False)
        return head, list(messages)

    async def read_recent(
        self, lineage: str, thread_id: str, enough: Callable[[ObservationRecord | None, list[Message]], bool]
    ) -> Recent | None:
        """The newest messages of a window too long to keep, read without the rest: the fewest
        of :data:`RECENT_FIRST`, four times as many, and so on, that are ``enough`` (given the
        head and them). None where the window is not known to be that long, where the thread's
        cursor moved since it was last read whole (an observation landed: the caller reads it
        whole), and where no such read is ``enough`` below :data:`MAX_MESSAGES` messages. Its
        messages are those after the head's cursor: the head is read again after them, and
        None is returned if the cursor moved meanwhile. (A head written without moving it, a
        failure's backoff say, leaves the window as it was.) Unknown thread → ThreadNotFoundError."""
        key = (lineage, thread_id)
        large = self._large.get(key)
        if large is None:
            return None
        head = await self._store.get_head(lineage)
        cursor = head.cursor(thread_id) if head else 0
        if cursor != large.cursor:
            return None
        want = RECENT_FIRST
        while True:
            try:
                newest = await self._store.list_messages(thread_id, after_seq=cursor, limit=want, newest_first=True)
            except ThreadNotFoundError:
                self._large.pop(key, None)
                raise
            messages = newest[::-1]
            whole = len(newest) < want  # (it has grown shorter since: observed, or deleted)
            if whole:
                recent = Recent(head, messages, 0, True)
                break
            # Every message after the window's newest when last read whole is among these (another
            # process may have added many since): only those before them are counted unread.
            if (messages[0].seq or 0) <= large.newest and enough(head, messages):
                seen = [m for m in messages if (m.seq or 0) <= large.newest]
                first = messages[0].seq or 0
                recent = Recent(
                    head, messages, max(0, large.observable - len(observable_messages(seen))), False,
                    older_stored=max(0, large.stored - sum(1 for m in seen if m.role != "system")),
                    systems=None if large.systems is None else tuple(m for m in large.systems if (m.seq or 0) < first),
                )
                break
            want *= 4
            if want > MAX_MESSAGES:
                return None
        again = await self._store.get_head(lineage)
        if (again.cursor(thread_id) if again else 0) != cursor:
            return None
        self._large.move_to_end(key)
        return recent

    def known_long(self, lineage: str, thread_id: str) -> bool:
        """Whether the window was too long to keep when last read whole (a hint: it may have
        been observed since)."""
        return (lineage, thread_id) in self._large

    async def save(
        self, lineage: str, thread_id: str, messages: list[Message], *, after_seq: int | None = None
    ) -> Saved:
        """Save ``messages`` (``Store.save_messages``): see :class:`Saved`. This returns once
        the rows are written, before they are durable
        (:func:`~obsmem.storage.contract.save_marked_early`), so the caller can build a context
        from them while the disk syncs. Awaiting ``commit()`` waits for the save to be stored
        (raising its error when it was not) and only then keeps the new window: until it is
        durable, no reader of this engine is handed what might not be stored. ``after_seq``: the
        store's ordering guard (``ThreadChangedError``, nothing saved, when the thread holds a
        newer message that calls or answers a tool)."""
        saved, before, after, done = await save_marked_early(
            self._store, lineage, thread_id, messages, after_seq=after_seq
        )
        key = (lineage, thread_id)
        kept = self._kept.get(key)
        stale = before is not None and kept is not None and kept[0] != before
        if before is None or after is None or kept is None or kept[0] != before:
            self._drop(key)
            return Saved(saved, None, self._commit(key, done, None), stale)
        head, window = kept[1]
        cursor = head.cursor(thread_id) if head else 0
        seqs = [m.seq or 0 for m in saved]
        if all(a < b for a, b in zip([(window[-1].seq or 0) if window else cursor, *seqs], seqs)):
            # The common case: new messages after the window, each once (strictly increasing
            # seqs above the window's: none of them is in it, nor twice in the batch): appended,
            # and only their characters counted.
            grown = [*window, *saved]
            chars: int | None = kept[2] + sum(_read_only(m) for m in saved)
        else:
            grown = extended(window, saved, cursor)
            chars = None
        return Saved(saved, (head, list(grown)), self._commit(key, done, (kept, after, (head, grown), chars)), stale)

    def _commit(
        self, key: tuple[str, str], done: asyncio.Future[None],
        keep: tuple[tuple[WindowMark, Window, int], WindowMark, Window, int | None] | None,
    ) -> Callable[[], Awaitable[None]]:
        """The commit of a save (see :meth:`save`): ``keep`` is what to keep once it is durable
        (the window kept before the save, the mark after it, the window and its characters), kept
        only if nothing replaced that window meanwhile (a read or a write of this engine)."""

        async def commit() -> None:
            try:
                await done
            except BaseException:
                self._drop(key)
                raise
            if keep is not None and self._kept.get(key) is keep[0]:
                self._keep(key, keep[1], keep[2], keep[3])

        return commit

    async def add_parts(self, lineage: str, message_id: str, parts: list[DataPart]) -> Message:
        """``Store.add_message_parts`` (markers on a message); a kept window that was current just
        before it holds the message as written after it."""
        message, before, after = await add_parts_marked(self._store, lineage, message_id, parts)
        self.parts_added(lineage, message, before, after)
        return message

    def parts_added(self, lineage: str, message: Message, before: WindowMark | None, after: WindowMark | None) -> None:
        """Parts were added to ``message`` (as written now), between the marks ``before`` and
        ``after`` of its window: a kept window that was current just before holds it as written."""
        key = (lineage, message.thread_id or "")
        kept = self._kept.get(key)
        if kept is None:
            return
        if before is None or after is None or kept[0] != before:
            self._drop(key)
            return
        head, window = kept[1]
        self._keep(key, after, (head, [message if m.id == message.id else m for m in window]))

    def wrote(self, head: ObservationRecord, over: ObservationRecord | None) -> None:
        """This engine just made ``head`` the live head of its lineage, by a compare-and-set
        write over ``over`` (None: it created the lineage's first head). A head write changes no
        message, and a compare-and-set never moves a cursor backward, so a kept window read at
        ``over`` is the window at ``head`` for the same messages: those after ``head``'s cursor,
        under the mark with ``head``'s id and version. A window kept at any other head is
        dropped (what happened between is unknown). If anything changed since (a message, a
        later write), the store's mark differs from the new one and the window is read."""
        base = (over.id, over.version) if over is not None else (None, None)
        for thread_id in list(self._threads.get(head.lineage, ())):
            key = (head.lineage, thread_id)
            mark, (_, messages), _ = self._kept[key]
            if mark[2:] != base:
                self._drop(key)
                continue
            cursor = head.cursor(thread_id)
            self._keep(key, (*mark[:2], head.id, head.version), (head, [m for m in messages if (m.seq or 0) > cursor]))

    def discard(self, thread_id: str) -> None:
        """Drop the kept windows of ``thread_id`` (found deleted)."""
        for key in [k for k in self._kept if k[1] == thread_id]:
            self._drop(key)
        for key in [k for k in self._large if k[1] == thread_id]:
            del self._large[key]

    def forget(self) -> None:
        """Drop every kept window (after a delete: no deleted text stays in this process)."""
        self._kept.clear()
        self._threads.clear()
        self._large.clear()
        self._messages = self._chars = 0

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._messages -= len(old[1][1])
            self._chars -= old[2]
            threads = self._threads[key[0]]
            threads.discard(key[1])
            if not threads:
                del self._threads[key[0]]

    def _keep(self, key: tuple[str, str], mark: WindowMark | None, window: Window, chars: int | None = None) -> None:
        """Keep ``window`` under ``mark`` (its messages made read-only); ``chars``: its
        characters when known (a kept window's, head included, plus those of the messages
        appended to it)."""
        self._drop(key)
        messages = window[1]
        if mark is None or len(messages) > MAX_MESSAGES:
            return
        if chars is None:
            chars = sum(_read_only(m) for m in messages) + _head_chars(window[0])
        if chars > min(MAX_WINDOW_CHARS, self._max_chars):
            return
        self._kept[key] = (mark, window, chars)
        self._threads.setdefault(key[0], set()).add(key[1])
        self._messages += len(messages)
        self._chars += chars
        while self._chars > self._max_chars or max(self._messages, len(self._kept)) > self._capacity:
            self._drop(next(iter(self._kept)))


def extended(window: Sequence[Message], saved: Sequence[Message], cursor: int | None = None) -> list[Message]:
    """``window`` with ``saved`` written since, by seq: a message saved again replaces its old
    copy. With ``cursor`` (the window's), one at or below it (observed already) is left out."""
    if not saved:
        return list(window)
    fresh = {m.id: m for m in saved}
    kept = [m for m in window if m.id not in fresh]
    added = fresh.values() if cursor is None else [m for m in fresh.values() if (m.seq or 0) > cursor]
    return sorted([*kept, *added], key=lambda m: m.seq or 0)


def _head_chars(head: ObservationRecord | None) -> int:
    """The characters of text ``head`` holds (its observations, buffered chunks and reflection,
    the threads' hints): what keeping it costs, counted with its window's messages."""
    if head is None:
        return 0
    chars = len(head.active_observations)
    for chunk in head.buffered_chunks:
        chars += len(chunk.observations) + len(chunk.current_task or "") + len(chunk.suggested_response or "")
        chars += sum(len(message_id) for message_id in chunk.message_ids)
    if head.buffered_reflection is not None:
        chars += len(head.buffered_reflection.text)
    for state in head.threads.values():
        chars += sum(len(text or "") for text in (state.current_task, state.suggested_response, state.thread_title))
    return chars


# -- read-only messages ------------------------------------------------------------------------

_READ_ONLY = "_obsmem_read_only"  # on a kept message: its characters (not a field)


def _read_only(message: Message) -> int:
    """Make a message the store returned (so nobody else holds it) read-only in full, once; its
    characters of content (what the bound counts)."""
    done = message.__dict__.get(_READ_ONLY)
    if done is not None:
        return int(done)
    chars = 0
    for part in message.parts:
        if isinstance(part, TextPart | ReasoningPart):
            chars += len(part.text)
        elif isinstance(part, FilePart):
            chars += len(part.data or "") + len(part.url or "")
        elif isinstance(part, ToolCallPart):
            part.__dict__["args"] = _frozen(part.args)
            chars += _size(part.args)
        elif isinstance(part, ToolResultPart):
            part.__dict__["result"] = _frozen(part.result)
            chars += _size(part.result)
        elif isinstance(part, DataPart):
            part.__dict__["data"] = _frozen(part.data)
            chars += _size(part.data)
    message.__dict__["metadata"] = _frozen(message.metadata)
    chars += _size(message.metadata) if message.metadata else 0
    message.__dict__[_READ_ONLY] = chars
    return chars


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return 1_000


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError(
        "This message is shared by obsmem's contexts and is read-only; "
        "change a copy (message.model_copy(deep=True))."
    )


class ReadOnlyDict(dict[str, Any]):
    """A dict that refuses changes (copies of it are plain dicts)."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


class ReadOnlyList(list[Any]):
    """A list that refuses changes (copies of it are plain lists)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]


def _frozen(value: Any) -> Any:
    """``value`` with every dict and list in it read-only (new containers; the rest as it is)."""
    if isinstance(value, dict) and not isinstance(value, ReadOnlyDict):
        return ReadOnlyDict({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list) and not isinstance(value, ReadOnlyList):
        return ReadOnlyList(_frozen(v) for v in value)
    return value
