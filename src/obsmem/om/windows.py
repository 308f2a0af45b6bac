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

Kept messages are shared by the contexts built from them (as every message a store returns is
a frozen model): treat a context's messages as read-only, ``metadata`` dicts included.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from obsmem.storage.contract import (
    ObservationRecord,
    Store,
    WindowMark,
    add_parts_marked,
    read_marked_window,
    save_marked,
    window_mark,
)
from obsmem.types import DataPart, Message

__all__ = ["Window", "Windows"]

Window = tuple[ObservationRecord | None, list[Message]]

CAPACITY = 16_384  # messages in all kept windows; the least recently used window goes first
MAX_MESSAGES = 512  # a longer window is not kept (read afresh: it is rare, and large)


class Windows:
    """The windows one engine read or wrote last, by (lineage, thread)."""

    def __init__(self, store: Store, *, capacity: int = CAPACITY) -> None:
        """``capacity``: messages in all kept windows together."""
        self._store = store
        self._capacity = capacity
        self._kept: OrderedDict[tuple[str, str], tuple[WindowMark, Window]] = OrderedDict()
        self._messages = 0  # in all kept windows
        self._threads: dict[str, set[str]] = {}  # lineage -> the threads whose windows are kept

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
        head, messages, mark = await read_marked_window(self._store, lineage, thread_id)
        self._keep(key, mark, (head, messages))
        return head, list(messages)

    async def save(
        self, lineage: str, thread_id: str, messages: list[Message]
    ) -> tuple[list[Message], Window | None]:
        """Save ``messages`` (``Store.save_messages``); return them as stored, and the window
        after the save when it is known without a read (the kept window was current just before
        it), else None."""
        saved, before, after = await save_marked(self._store, lineage, thread_id, messages)
        key = (lineage, thread_id)
        kept = self._kept.get(key)
        if before is None or after is None or kept is None or kept[0] != before:
            self._drop(key)
            return saved, None
        head, window = kept[1]
        extended = _extended(window, saved, head.cursor(thread_id) if head else 0)
        self._keep(key, after, (head, extended))
        return saved, (head, list(extended))

    async def add_parts(self, lineage: str, message_id: str, parts: list[DataPart]) -> Message:
        """``Store.add_message_parts`` (markers on a message); a kept window that was current just
        before it holds the message as written after it."""
        message, before, after = await add_parts_marked(self._store, lineage, message_id, parts)
        key = (lineage, message.thread_id or "")
        kept = self._kept.get(key)
        if kept is None:
            return message
        if before is None or after is None or kept[0] != before:
            self._drop(key)
            return message
        head, window = kept[1]
        self._keep(key, after, (head, [message if m.id == message.id else m for m in window]))
        return message

    def wrote(self, head: ObservationRecord) -> None:
        """This engine just made ``head`` the live head of its lineage (a compare-and-set write
        that applied). A write of the head changes no message, so each kept window of the
        lineage is still the window for its message revision with this head: its messages after
        the head's cursor (cursors never move backward), under the mark with the head's id and
        version. If anything else changed meanwhile (a message, or a later write of the head),
        the store's mark differs from that one and the window is read."""
        for thread_id in list(self._threads.get(head.lineage, ())):
            key = (head.lineage, thread_id)
            mark, (_, messages) = self._kept[key]
            cursor = head.cursor(thread_id)
            self._keep(key, (*mark[:2], head.id, head.version), (head, [m for m in messages if (m.seq or 0) > cursor]))

    def forget(self) -> None:
        """Drop every kept window (after a delete: no deleted text stays in this process)."""
        self._kept.clear()
        self._threads.clear()
        self._messages = 0

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._messages -= len(old[1][1])
            threads = self._threads[key[0]]
            threads.discard(key[1])
            if not threads:
                del self._threads[key[0]]

    def _keep(self, key: tuple[str, str], mark: WindowMark | None, window: Window) -> None:
        self._drop(key)
        if mark is None or len(window[1]) > MAX_MESSAGES:
            return
        self._kept[key] = (mark, window)
        self._threads.setdefault(key[0], set()).add(key[1])
        self._messages += len(window[1])
        while self._messages > self._capacity:
            self._drop(next(iter(self._kept)))


def _extended(window: Sequence[Message], saved: Sequence[Message], cursor: int) -> list[Message]:
    """``window`` (the messages after ``cursor``) with ``saved`` written since: a message saved
    again replaces its old copy; one at or below the cursor (observed already) is not in a window."""
    fresh = {m.id: m for m in saved}
    kept = [m for m in window if m.id not in fresh]
    return sorted([*kept, *(m for m in fresh.values() if (m.seq or 0) > cursor)], key=lambda m: m.seq or 0)
